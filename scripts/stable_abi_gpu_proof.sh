#!/usr/bin/env bash
# The stable ABI on a GPU machine, after `make test` built the tree there (docs/shipping-a-plugin.md):
#   1. a cuda_stable binary built elsewhere on newer torch headers (TORCH_TARGET 2.11, e.g. on
#      the CI machine's torch 2.14.1) passes tests/python/plugins/test_stable_abi.py under this
#      machine's torch: conformance, opcheck, the caller's stream, CUDA graphs, selection;
#   2. the cost: the stable plugins beside the full-ABI ones (mul, identity_conv, scale_) on
#      CUDA (CUDA graphs) and on the CPU, and the per-call host cost of each (call_overhead
#      rows, which the engine times when no --ops is given).
# Usage: scripts/stable_abi_gpu_proof.sh DIR_WITH_THE_OTHER_CUDA_STABLE OUT_DIR [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
other=$(cd "$1" && pwd) out=$2 BUILD=${3:-build}
PY=$(cat "$BUILD/.python")
export PYTHONPATH=$PWD/python BACKPLANE_LIB_DIR=$PWD/$BUILD/lib BACKPLANE_BIN=$PWD/$BUILD/bin/backplane
echo "== 1. cuda_stable from $other ($(sed -n 's/^torch_version: //p' "$other/libbackplane_cuda_stable.manifest.yaml")"\
     "target) under torch $("$PY" -c 'import torch; print(torch.__version__)')"
BACKPLANE_STABLE_CUDA_PLUGIN_DIR=$other "$PY" -m pytest -q -p no:cacheprovider -rs tests/python/plugins/test_stable_abi.py
bench=("$BUILD/bin/backplane" bench --plugin-path "$other:$PWD/$BUILD/tests/fixtures" --no-compile)
echo "== 2a. CUDA: cuda beside cuda_stable, CUDA graphs"
"${bench[@]}" --backends cuda,cuda_stable --ops mul,identity_conv,scale_ --dtypes float32,bfloat16 \
  --shapes 1M_elements,64M_elements,64M_transposed --cuda-graph --repetitions 3 --json "$out/stable-cuda.json"
echo "== 2b. CPU: cpu beside cpu_stable"
"${bench[@]}" --backends cpu,cpu_stable --ops mul,identity_conv,scale_ --dtypes float32,bfloat16 \
  --shapes 1M_elements,1M_transposed,1M_broadcast_row --repetitions 3 --json "$out/stable-cpu.json"
echo "== 2c. per-call host cost (every op once, float32, to reach the call_overhead rows)"
"${bench[@]}" --backends cpu,cpu_stable,cuda,cuda_stable --dtypes float32 --repetitions 3 \
  --json "$out/stable-call-cost.json" | grep "host cost"
