#!/usr/bin/env bash
# One call on the GPU machine: `make build` (setup picks a compiler that works with the
# torch there), then the steps named on the command line, in order (default: all but
# `test`). Logs and JSON go to $OUT (the device tool's output folder) or ./gpu-out; the
# console gets a short summary of each step.
#   check       the conformance suite on cuda (every op, every layout and dtype)
#   bench       backplane bench on cuda (BENCH_OPS=a,b to narrow it; BENCH_ARGS to replace the
#               repetitions and minimum time), its markdown table
#   train       forward+backward of every op with a backward: beside its registry baseline,
#               reference and torch.compile (--profile: each op's kernels), models.train on cuda,
#               the decoder's step time and the HF Llama gradient check
#   sanitizers  compute-sanitizer memcheck over the CUDA conformance suite, racecheck over
#               the ops that share memory within a block (SANITIZE_OPS=a,b to narrow it)
#   cudatests   the CUDA pytest files alone (test_cuda.py, test_cuda_dependent_launch.py)
#   launch      dependent launch off, then on (BACKPLANE_CUDA_DEPENDENT_LAUNCH=0/1): the kernels
#               of a few microseconds from CUDA graphs beside aten, the 64M elementwise rows, and
#               the host cost of a call (LAUNCH_SETTINGS=1: on alone)
#   test        `make test`, timed
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
STEPS=${*:-check bench train sanitizers}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python
nvidia-smi -L
t0=$SECONDS
make build > "$OUT/build.log" 2>&1 || { grep -m3 -B2 -A15 "error" "$OUT/build.log"; tail -20 "$OUT/build.log"; exit 1; }
P=$(cat build/.python)
python=$P BUILD=build source scripts/python_env.sh
echo "build: $(( SECONDS - t0 )) s; $("$P" -c 'import torch; print("torch", torch.__version__)'); $(date -u +%F)"
for step in $STEPS; do
  t=$SECONDS
  case $step in
    check)
      timeout 240 build/bin/backplane check --backends cuda > "$OUT/check.log" 2>&1
      echo "check rc=$?"; grep -v "^    " "$OUT/check.log" | tail -16 ;;
    bench)
      ops=${BENCH_OPS:+--ops $BENCH_OPS}
      BACKPLANE_PYTHON=$P timeout 400 build/bin/backplane bench --backends cuda $ops ${BENCH_ARGS:---repetitions 5 --min-time 0.1} \
        --json "$OUT/bench.json" > "$OUT/bench.txt" 2>&1
      echo "bench rc=$?"
      "$P" -m backplane bench --input "$OUT/bench.json" --markdown > "$OUT/bench.md" 2>&1
      grep -E "^\| [a-z_]+ \| cuda" "$OUT/bench.md" | cut -d'|' -f2,4,5,6,9,10 ;;
    train)
      timeout 540 "$P" -m backplane bench --backends cuda --backward --cuda-graph --json "$OUT/train_ops.json" \
        > "$OUT/train_ops.txt" 2>&1; echo "bench --backward rc=$?"; grep -vE "^\s*$" "$OUT/train_ops.txt" | grep -v "^-" | tail -30
      timeout 120 "$P" -m models.train --backend cuda --steps 100 2>&1 | tail -1
      timeout 200 "$P" -m models.step_time 2>&1 | tail -6
      timeout 200 "$P" -m models.llama_check 2>&1 | tail -6 ;;
    sanitizers)
      ops=${SANITIZE_OPS:+--ops $SANITIZE_OPS}
      timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/backplane check --backends cuda $ops \
        > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|every implemented" "$OUT/memcheck.log"
      timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 build/bin/backplane check --backends cuda \
        --ops rms_norm,rms_norm_backward,softmax,softmax_backward > "$OUT/racecheck.log" 2>&1
      echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|every implemented" "$OUT/racecheck.log" ;;
    cudatests)
      timeout 300 "$P" -m pytest -q -x tests/python/cuda/test_cuda.py tests/python/cuda/test_cuda_dependent_launch.py \
        > "$OUT/cudatests.log" 2>&1
      echo "cudatests rc=$?"; grep -E "passed|failed|Error" "$OUT/cudatests.log" | tail -5 ;;
    launch)
      # Each row's us beside PyTorch's (aten) in one process, off then on. Small kernels from
      # CUDA graphs of 20 calls, the 64M rows from the stream; then the host cost of a call.
      small=1M_elements,1M_transposed,1M_permuted,1M_sliced,1M_broadcast_row,decode_1x4096,decode_32x8192
      small=$small,decode_128x8192,vocab_32x32000
      large=64M_elements,64M_transposed,64M_permuted,64M_sliced,64M_broadcast_row
      # Compiled out (an architecture below 90), both settings are the same: say which it is.
      grep -m1 -o "BACKPLANE_CUDA_DEPENDENT_LAUNCH=[01]" build/build.ninja || echo "dependent launch: no define found"
      settings=${LAUNCH_SETTINGS:-0 1}
      for dl in $settings; do
        export BACKPLANE_CUDA_DEPENDENT_LAUNCH=$dl
        timeout 120 "$P" -m backplane bench --backends cuda --cuda-graph --repetitions 3 --no-compile \
          --ops add,mul,rms_norm,softmax --shapes $small --dtypes bfloat16,float16,float32 \
          --json "$OUT/small_dl$dl.json" > "$OUT/small_dl$dl.txt" 2>&1
        echo "small kernels from graphs, dependent launch $dl: rc=$?"
        timeout 150 "$P" -m backplane bench --backends cuda --repetitions 3 --no-compile --ops add,mul --shapes $large \
          --dtypes bfloat16,float16,float32 --json "$OUT/large_dl$dl.json" > "$OUT/large_dl$dl.txt" 2>&1
        echo "64M rows, dependent launch $dl: rc=$?"
        timeout 60 "$P" -m backplane.bench.host_cost --device cuda --rounds 11 --ops add,rms_norm,rms_norm_backward \
          > "$OUT/host_cost_dl$dl.txt" 2>&1
        echo "host cost, dependent launch $dl: rc=$?"
      done
      unset BACKPLANE_CUDA_DEPENDENT_LAUNCH
      for size in small large; do  # the first setting's run as the base of the second's
        runs=($(for dl in $settings; do echo "$OUT/${size}_dl$dl.json"; done))
        "$P" -m backplane bench --input "${runs[-1]}" ${runs[1]:+--compare "${runs[0]}"}
      done
      for dl in $settings; do grep -h -E "^torch.ops|torch.add on" "$OUT/host_cost_dl$dl.txt"; done ;;
    test)
      (make test 2>&1; echo "make test rc=$?") > "$OUT/test.log"
      grep -E "^\[test\]|passed|failed|rc=" "$OUT/test.log"; grep -A11 "slowest 10" "$OUT/test.log" ;;
    *) echo "gpu_verify.sh: unknown step '$step'" >&2; exit 2 ;;
  esac
  echo "[$step: $(( SECONDS - t )) s]"
done
