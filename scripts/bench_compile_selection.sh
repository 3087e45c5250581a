#!/usr/bin/env bash
# The figures of compile-time selection (docs/selection.md) on a CUDA machine, into $1
# (default bench/results/compile-selection): a default `tune --mode compile` over every op,
# the bench's compiled rows with that selection beside the plugin's and torch.compile of the
# reference, and the transformers Llama steps with and without it. Needs a build with
# BACKPLANE_CUDA=ON (make build) and transformers for the Llama steps.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results/compile-selection}
mkdir -p "$out"
bin=build/bin/backplane
python=$(cat build/.python)
export PYTHONPATH=$PWD/python BACKPLANE_LIB_DIR=$PWD/build/lib
t0=$SECONDS
"$bin" tune --backends cuda --mode compile --dtypes float32,bfloat16 --out "$out/selection.yaml" 2>&1 | tee "$out/tune.txt"
echo "tune --mode compile: $(( SECONDS - t0 )) s" | tee -a "$out/tune.txt"
"$bin" bench --selection "$out/selection.yaml" --backends cuda --cuda-graph --mode compile \
  --json "$out/bench.json" 2>&1 | tee "$out/bench.txt"
if "$python" -c "import transformers" 2>/dev/null; then
  for size in small 8b; do
    "$python" -m models.llama_step --size "$size" 2>&1 | tee "$out/llama_$size.txt"
    "$python" -m models.llama_step --size "$size" --selection "$out/selection.yaml" 2>&1 | tee -a "$out/llama_$size.txt"
  done
fi
