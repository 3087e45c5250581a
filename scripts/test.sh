#!/usr/bin/env bash
# The whole test suite on the build in $1 (default build): gtest through CTest, then pytest.
# GPU-only cases skip with their reason on machines without the device.
#   BACKPLANE_PYTHON_PRELOAD=libs  LD_PRELOAD for the Python processes only (a sanitizer's
#                                  runtime, scripts/sanitizers.sh asan)
#   BACKPLANE_SKIP_TRITON_SUITE=why  leave out the interpreted Triton kernel suite
#                                  (tests/python/triton), saying why (scripts/sanitizers.sh)
#   BACKPLANE_MAIN_TESTS="paths"   the main pytest process's tests instead of tests/python
#                                  (the npu and Triton suites run apart either way); paths
#                                  from the repository root, separated by spaces
#   BACKPLANE_TESTS_LEFT_OUT="paths"  test files or folders (same form) no pytest process runs
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
python=$(cat "$BUILD/.python")
source scripts/python_env.sh
# The conformance suite runs on every backend the build made; where a device is
# missing, its cases skip with the reason.
backends=cpu
[ -f "$BUILD/lib/libbackplane_npu.so" ] && backends=$backends,npu
[ -f "$BUILD/lib/libbackplane_cuda.so" ] && backends=$backends,cuda
export BACKPLANE_TEST_BACKENDS=${BACKPLANE_TEST_BACKENDS:-$backends}
echo "conformance backends: $BACKPLANE_TEST_BACKENDS"
# The machine, for reading the times the suite prints: machines of one kind have run the
# same build in 1.5x the CPU-seconds of each other (bench/results/test-times.md).
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
echo "[test] machine: $(nproc) cores${cpu_model:+, $cpu_model}"
# The four conformance runs (every backend; the CPU kernels forced to each build) go side
# by side: each takes a share of the cores for ATen's threads. At its default, each takes
# every core, and on the 16-core GPU machine the runs' spinning threads starved each other.
# --no-tests=error: a tree configured without its tests (BACKPLANE_BUILD_TESTS=OFF) fails
# here instead of passing with nothing run.
run_ctest() {
  ctest --test-dir "$BUILD" --output-on-failure --no-tests=error -j "$(nproc)"
}
# On a machine of 12 cores or more, ctest runs beside pytest rather than before it, a
# thread each: its 10-15 s then fall in the seconds pytest's workers spend importing
# torch and collecting, and its output follows pytest's. On fewer cores it goes first.
ctest_pid=
if (( $(nproc) >= 12 )); then
  ctest_log=$(mktemp)
  ( t=$SECONDS; status=0
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} run_ctest > "$ctest_log" 2>&1 || status=$?
    echo "[test] ctest: $(( SECONDS - t )) s (beside pytest)" >> "$ctest_log"
    exit "$status" ) & ctest_pid=$!
else
  t0=$SECONDS
  ctest_threads=$(( $(nproc) / 4 > 0 ? $(nproc) / 4 : 1 ))
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-$ctest_threads} run_ctest
  echo "[test] ctest: $(( SECONDS - t0 )) s"
fi
# ctest_result: ctest's output where it ran beside pytest, and its status.
ctest_result() {
  [ -n "$ctest_pid" ] || return 0
  local status=0
  wait "$ctest_pid" || status=$?
  echo "--- ctest (run beside pytest):"
  cat "$ctest_log"
  rm -f "$ctest_log"
  return "$status"
}
t0=$SECONDS
# The npu tests in a process of their own: a registered PrivateUse1 device becomes
# torch's "accelerator" (torch.accelerator, default pin_memory device), which the
# CUDA tests must not see.
npu_tests=(tests/python/npu backends/npu/tests)  # npu/test_npu_autoload.py among them
# The Triton plugin's kernel tests set TRITON_INTERPRET=1 (Triton's CPU interpreter) for
# their whole process, which no other test may run under: a process of their own too.
triton_tests=(tests/python/triton)
read -r -a main_tests <<<"${BACKPLANE_MAIN_TESTS:-tests/python}"
(( ${#main_tests[@]} )) || main_tests=(tests/python)  # a value of only spaces: the default
read -r -a left_out <<<"${BACKPLANE_TESTS_LEFT_OUT:-}"
left_out=("${left_out[@]/#/--ignore=}")
triton_skipped=${BACKPLANE_SKIP_TRITON_SUITE:-}
# triton_suite [PYTEST_ARGS...]: the interpreted suite in the foreground, or the reason it is
# left out.
triton_suite() {
  if [ -n "$triton_skipped" ]; then
    echo "--- Triton plugin kernels under Triton's interpreter: not run ($triton_skipped)"
    return 0
  fi
  echo "--- Triton plugin kernels under Triton's interpreter:"
  "${py[@]}" -m pytest "${triton_tests[@]}" "${left_out[@]}" -q -p no:cacheprovider -rs "$@"
}
# With pytest-xdist (setup installs it where it can), tests run on 13 workers per 16 cores
# (rounded up), at least 2 and at most 13, and the npu process beside them (2 workers on the
# 16-core GPU machine: 15 processes, a core left for the child processes tests start); an
# AOTI package that several tests share is compiled once per run by whichever worker needs it first
# (tests/python/conftest.py). Many tests wait on child processes, so even a 2-core CI
# machine gains from 2 workers. Without pytest-xdist, one process each.
workers=$(( ($(nproc) * 13 + 15) / 16 ))
(( workers > 13 )) && workers=13
(( workers < 2 && $(nproc) >= 2 )) && workers=2
parallel=() npu_parallel=()
# The npu process is a suite of its own (Inductor compiles among its tests): where there
# are cores to spare it gets workers too, a sixth as many: it has about half the main
# suite's work (bench/results/test-times.md), so it still does not finish last.
npu_workers=$(( workers / 6 ))
if (( workers >= 2 )) && "$python" -c 'import xdist' 2>/dev/null; then
  parallel=(-n "$workers")
  (( npu_workers >= 2 )) && npu_parallel=(-n "$npu_workers")
  # Tests taken from a busy worker by an idle one (pytest-xdist >= 3.2): a few tests take a
  # minute or more (an AOTInductor compile), and handed out up front they pile up on one.
  "$python" -c 'import sys, xdist; sys.exit(tuple(map(int, xdist.__version__.split(".")[:2])) < (3, 2))' 2>/dev/null &&
    parallel+=(--dist worksteal)
  (( npu_workers >= 2 )) || npu_workers=1
  echo "pytest: $workers workers (pytest-xdist), the npu tests beside them on $npu_workers"
  # The cores shared out: each process's ATen threads, and Inductor compiling in the
  # process itself rather than in a pool of one subprocess per core. Left to their
  # defaults, every worker takes a thread and a compile process per core, and on a
  # many-core machine each test then runs several times slower.
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / (workers + npu_workers) > 0 ? $(nproc) / (workers + npu_workers) : 1 ))}
  export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-1}
fi
# The Triton plugin's launch configurations untuned (its first candidate at every shape):
# tuning times each candidate at each new shape, a JIT compile apiece, and checks no value.
# The tests that are about tuning set it back (tests/python/cuda/test_cuda_triton_launch_cache.py).
export BACKPLANE_TRITON_AUTOTUNE=${BACKPLANE_TRITON_AUTOTUNE:-0}
export PYTHONPATH=$PWD/python
# The Python suites test this build's libraries and binaries, not build/'s.
export BACKPLANE_LIB_DIR=${BACKPLANE_LIB_DIR:-$PWD/$BUILD/lib} BACKPLANE_BIN=${BACKPLANE_BIN:-$PWD/$BUILD/bin/backplane}
py=("$python")
[ -n "${BACKPLANE_PYTHON_PRELOAD:-}" ] && py=(env "LD_PRELOAD=$BACKPLANE_PYTHON_PRELOAD" "$python")
if (( ${#parallel[@]} )); then
  npu_log=$(mktemp)
  "${py[@]}" -m pytest "${npu_tests[@]}" "${left_out[@]}" -q -p no:cacheprovider -rs "${npu_parallel[@]}" > "$npu_log" 2>&1 & npu_pid=$!
  # The interpreted Triton suite beside them too where the npu suite has workers of its own
  # (cores to spare): on the GPU machine, whose interpreter cannot run the row kernels
  # (tests/python/triton_interpreter.py), it only skips, which took 18 s of 13 workers'
  # start-up after the main suite. On CI's 2 cores it follows the main suite: beside it, in
  # one process, it tripled the main suite's time there (674 -> 2,098 s).
  triton_pid=
  if (( ${#npu_parallel[@]} )) && [ -z "$triton_skipped" ]; then
    triton_log=$(mktemp)
    "${py[@]}" -m pytest "${triton_tests[@]}" "${left_out[@]}" -q -p no:cacheprovider -rs "${npu_parallel[@]}" > "$triton_log" 2>&1 & triton_pid=$!
  fi
  status=0
  "${py[@]}" -m pytest "${main_tests[@]}" -q -p no:cacheprovider -rs --durations="${PYTEST_DURATIONS:-10}" "${parallel[@]}" \
    "${npu_tests[@]/#/--ignore=}" "${triton_tests[@]/#/--ignore=}" "${left_out[@]}" || status=$?
  npu_status=0
  wait "$npu_pid" || npu_status=$?
  echo "--- npu tests (run beside the others):"
  cat "$npu_log"
  rm -f "$npu_log"
  triton_status=0
  if [ -n "$triton_pid" ]; then
    wait "$triton_pid" || triton_status=$?
    echo "--- Triton plugin kernels under Triton's interpreter (run beside the others):"
    cat "$triton_log"
    rm -f "$triton_log"
  else
    triton_suite "${parallel[@]}" || triton_status=$?
  fi
  echo "[test] pytest: $(( SECONDS - t0 )) s"
  ctest_status=0
  ctest_result || ctest_status=$?
  (( status == 0 && npu_status == 0 && triton_status == 0 && ctest_status == 0 ))
else
  ctest_result  # one process at a time: ctest's result first, as where it ran before pytest
  "${py[@]}" -m pytest "${main_tests[@]}" -q -p no:cacheprovider -rs "${npu_tests[@]/#/--ignore=}" \
    "${triton_tests[@]/#/--ignore=}" "${left_out[@]}"
  "${py[@]}" -m pytest "${npu_tests[@]}" "${left_out[@]}" -q -p no:cacheprovider -rs
  triton_suite
fi
