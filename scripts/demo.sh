#!/usr/bin/env bash
# The main job on the default backends (every plugin the build made): list them,
# run every op on each against PyTorch, then a short benchmark table.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
python=$(cat "$BUILD/.python")
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
if [ -x "$bin/backplane_bench" ]; then
  echo "== Benchmark (short run; see bench/RESULTS.md for full figures) =="
  json=$(mktemp)
  "$bin/backplane_bench" --benchmark_filter='/1048576/|rms_norm' --benchmark_min_time=0.05 \
    --benchmark_out="$json" --benchmark_out_format=json >/dev/null 2>&1
  "$python" bench/report.py "$json"
  rm -f "$json"
fi
