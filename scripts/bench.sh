#!/usr/bin/env bash
# `make bench`: every op on the default backends, the table, its JSON and its plot, in the
# Python environment the tests and the demo share.
#   scripts/bench.sh [BUILD] [backplane bench flags...]
# Default backends (without BACKPLANE_BACKENDS or --backends): cpu, and cuda where the build
# has the CUDA plugin and this machine a GPU. cuda rows are timed from CUDA graphs
# (--cuda-graph: the kernels, not the host's launches) where the build has that module.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build
if [ $# -gt 0 ] && [[ $1 != -* ]]; then
  BUILD=$1
  shift
fi
python=$(cat "$BUILD/.python")
source scripts/python_env.sh
chosen=()
if [[ " $* " != *" --backends "* ]]; then
  backends=${BACKPLANE_BACKENDS:-}
  # Asked once, and only where cuda may be wanted (importing torch takes seconds): 1 where
  # the CUDA plugin is built and a GPU is here.
  gpu=0
  if { [ -z "$backends" ] || [[ ,$backends, == *,cuda,* ]]; } && [ -f "$BUILD/lib/libbackplane_cuda.so" ] &&
     "$python" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
    gpu=1
  fi
  if [ -z "$backends" ]; then
    backends=cpu
    if [ $gpu = 1 ]; then backends=cpu,cuda; fi
  fi
  chosen=(--backends "$backends")
  # Only where cuda rows will run: without a GPU the engine skips cuda, and --cuda-graph
  # with no cuda backend left is refused.
  if [[ ,$backends, == *,cuda,* ]] && [ -f "$BUILD/lib/backplane_bench_cuda_graph.so" ] && [ $gpu = 1 ]; then
    chosen+=(--cuda-graph)
  fi
  echo "make bench: backends $backends${chosen[2]:+, cuda rows from CUDA graphs}" >&2
fi
# ${chosen[@]+...}: an empty array under set -u is an error in bash before 4.4.
BACKPLANE_PYTHON=$python exec "$BUILD/bin/backplane" bench ${chosen[@]+"${chosen[@]}"} --repetitions 3 --min-time 0.1 \
  --json "$BUILD/bench.json" --plot "$BUILD/bench.png" "$@"
