#!/usr/bin/env bash
# Backplane's C++ under sanitizers, in a build tree of its own (no CUDA: the CUDA kernels
# run under compute-sanitizer on the GPU machine instead, `scripts/gpu_verify.sh sanitizers`):
#   scripts/sanitizers.sh asan [BUILD]   ASan+UBSan: the test suite (scripts/test.sh:
#                                        every gtest suite through CTest, and the pytest
#                                        suites with Python running the instrumented
#                                        libraries, ASan's runtime preloaded), the model
#                                        pipeline on one model, no slow test, no
#                                        interpreted Triton kernel (see below)
#   scripts/sanitizers.sh tsan [BUILD]   TSan: the npu runtime tests (its streams and
#                                        worker threads) and the 16-thread loader stress
#                                        test, each run 3 times
#   BACKPLANE_BUILD_ONLY=1               configure and build the tree, run nothing (.ci/run
#                                        builds the sanitizer trees beside make test and the
#                                        SDK journey)
# Any report fails the run (halt_on_error). The build uses clang where there is one (else
# the compiler setup chose) and the Python of the main build (build/.python), as
# `make test` leaves it.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?usage: scripts/sanitizers.sh asan|tsan [BUILD]}
case "$MODE" in
  asan) SANITIZE=address,undefined ;;
  tsan) SANITIZE=thread ;;
  *) echo "sanitizers.sh: unknown mode '$MODE' (asan or tsan)" >&2; exit 2 ;;
esac
BUILD=${2:-build-$MODE}
python=${TORCH_PYTHON:-$(cat build/.python)}
# clang where there is one (CI installs it for the fuzzers): it compiles torch's headers
# much faster than g++ under the sanitizers. Else the compiler setup chose.
cxx=${SANITIZE_CXX:-$(command -v clang++ || command -v clang++-14 || cat build/.cxx 2>/dev/null || command -v g++)}
generator=$(command -v ninja >/dev/null && echo "-G Ninja" || true)
# Leaks: libtorch's static registrations are never freed, by design. A test that asks
# for an impossible size expects an error, not ASan's abort.
export ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp
# The CPU kernels this machine runs (and DEFAULT, which registers them): the variant for
# another instruction set would never run here.
cpu_capability=AVX2
# The same four flags backends/cpu/capability.cpp requires of its AVX512 build.
grep -qw avx512f /proc/cpuinfo 2>/dev/null && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo &&
  grep -qw avx512vl /proc/cpuinfo && cpu_capability=AVX512
# -O1 with line tables only: sanitizer reports keep file:line, and the build (the longest
# part of CI on two cores) takes far less than at -O2 with full debug information.
cmake -S . -B "$BUILD" $generator -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1" -DCMAKE_EXE_LINKER_FLAGS_SANITIZE="" -DCMAKE_SHARED_LINKER_FLAGS_SANITIZE="" \
  -DCMAKE_MODULE_LINKER_FLAGS_SANITIZE="" \
  -DBACKPLANE_PYTHON="$python" -DBACKPLANE_SANITIZE="$SANITIZE" -DBACKPLANE_CUDA=OFF \
  -DBACKPLANE_CPU_CAPABILITIES="DEFAULT;$cpu_capability" \
  -DBACKPLANE_BUILD_BENCH=$([ "$MODE" = asan ] && echo ON || echo OFF) >/dev/null
build_start=$SECONDS
if [ "${BACKPLANE_BUILD_ONLY:-}" = 1 ]; then
  if [ "$MODE" = asan ]; then cmake --build "$BUILD" --parallel
  else cmake --build "$BUILD" --parallel --target backplane_npu_runtime_tests backplane_loader_tests backplane_acme; fi
  echo "[$MODE] build: $(( SECONDS - build_start )) s"
  exit 0
fi
if [ "$MODE" = asan ]; then
  cmake --build "$BUILD" --parallel
  echo "[$MODE] build: $(( SECONDS - build_start )) s"
  echo "$python" > "$BUILD/.python"
  # Python is not instrumented: ASan's runtime (and UBSan's) is preloaded into it, ahead
  # of the instrumented libraries it opens. Tests that expect a crash or an impossible
  # allocation know ASan answers those itself (allocator_may_return_null above).
  if "$cxx" --version | grep -q clang; then
    preload=$("$cxx" -print-file-name=libclang_rt.asan-x86_64.so)  # UBSan's handlers are in it
  else
    preload="$("$cxx" -print-file-name=libasan.so) $("$cxx" -print-file-name=libubsan.so)"
  fi
  # Three subsets, said here and in .ci/run. The model pipeline's tests
  # (tests/python/pipeline/test_models_pipeline.py) run on its identity model only, not
  # again on decoder_block: what the repeat adds is mostly the AOTInductor compile of a
  # larger model, with ASan's runtime in the compiler. And the tests marked slow (each an
  # AOTInductor or Inductor compile of a minute or so, tests/python/conftest.py) do not run
  # here: their time is g++ compiling generated code, and the C++ of ours they reach runs
  # in smaller tests that do run here (packages loaded in Python and run from C++ by
  # `backplane run`, npu packages among them: tests/python/aoti, backends/npu/tests/
  # test_aoti.py; every plugin kernel a compiled graph calls, through conformance and
  # opcheck). And the interpreted Triton kernel suite (tests/python/triton) does not run
  # here: its kernels are Python run by Triton's interpreter on NumPy, none of it
  # instrumented; the C++ a Triton-kind plugin goes through on the CPU (the core, and the
  # bridge python/src/python_kernels.cpp) runs under ASan in tests/python/plugins/
  # test_triton_kind.py and the bench's Triton rows. make test runs them all.
  # BACKPLANE_ASAN_ALL=1 runs them all here too.
  if [ "${BACKPLANE_ASAN_ALL:-}" != 1 ]; then
    export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} -k 'not decoder_block' -m 'not slow'"
    export BACKPLANE_SKIP_TRITON_SUITE="ASan: its kernels are interpreted Python; make test runs it"
  fi
  BACKPLANE_PYTHON_PRELOAD="$preload" \
    BACKPLANE_TEST_BACKENDS=cpu,npu scripts/test.sh "$BUILD"
  if [ "${BACKPLANE_ASAN_ALL:-}" = 1 ]; then
    echo "sanitizers: ASan+UBSan, every gtest suite and the pytest suites passed with no report"
  else
    echo "sanitizers: ASan+UBSan, every gtest suite and the pytest suites (the model pipeline on its identity model, no test marked slow, no interpreted Triton kernel) passed with no report"
  fi
else
  cmake --build "$BUILD" --parallel --target backplane_npu_runtime_tests backplane_loader_tests backplane_acme
  echo "[$MODE] build: $(( SECONDS - build_start )) s"
  for run in 1 2 3; do
    "$BUILD/bin/backplane_npu_runtime_tests" --gtest_brief=1
    "$BUILD/bin/backplane_loader_tests" --gtest_filter='LoaderStress.*' --gtest_brief=1
  done
  echo "sanitizers: TSan, npu runtime tests and the loader stress test passed 3 times with no report"
fi
