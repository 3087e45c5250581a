#!/usr/bin/env bash
# The main job on the default backends (every plugin the build made): list them,
# run every op on each against PyTorch, then a short benchmark table.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
python=$(cat "$BUILD/.python")
source scripts/python_env.sh
bin=$BUILD/bin

echo "== Backends =="
"$bin/backplane" list
echo
echo "== Coverage: each op on each backend =="
"$bin/backplane" ops
echo
echo "== Every op on every loaded backend, against PyTorch =="
"$bin/backplane" check
echo
echo "== The identity model: torch.export -> AOTInductor package -> C++ runner (no Python) =="
export BACKPLANE_BIN=$bin/backplane
for step in export aoti cpp; do
  PYTHONPATH=$PWD/python "$python" -m models.pipeline "$step" identity --device cpu --out "$BUILD/models"
done
echo
if [ -f "$BUILD/lib/libbackplane_npu.so" ]; then
  echo "== The npu device (an emulated PrivateUse1 accelerator) from Python =="
  BACKPLANE_LIB_DIR=$(cd "$BUILD/lib" && pwd) PYTHONPATH=$PWD/python "$python" -W ignore - <<'PY'
import torch, backplane
backplane.load("npu")
x = torch.randn(4, 16).to("npu:1")
w = torch.rand(16, device="npu:1") + 0.5
side = torch.npu.Stream(1)
with torch.npu.stream(side):                       # queued on a side stream of npu:1
    y = torch.ops.backplane.rms_norm(torch.ops.backplane.add(x, x, alpha=0.5), w, 1e-6)
torch.npu.current_stream(1).wait_stream(side)
ref = torch.nn.functional.rms_norm(1.5 * x.cpu(), (16,), w.cpu(), 1e-6)
print(f"devices: {torch.npu.device_count()}, result on {y.device}, "
      f"max |npu - torch| = {(y.cpu() - ref).abs().max().item():.2e}, "
      f"npu:1 memory: {torch.npu.memory_allocated(1)} bytes (peak {torch.npu.max_memory_allocated(1)})")
PY
  echo
fi
if [ -x "$bin/backplane_bench" ]; then
  echo "== Benchmark (a short run; the full tables: bench/results/) =="
  json=$(mktemp)
  "$bin/backplane_bench" --benchmark_filter='1M_elements_float32|decode_32x8192' --benchmark_min_time=0.05 \
    --benchmark_out="$json" --benchmark_out_format=json >/dev/null 2>&1
  PYTHONPATH=$PWD/python "$python" -m backplane bench --input "$json" --markdown
  rm -f "$json"
fi
