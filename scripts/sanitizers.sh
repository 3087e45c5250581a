#!/usr/bin/env bash
# Backplane's C++ under sanitizers, in a build tree of its own (no CUDA: the CUDA kernels
# run under compute-sanitizer on the GPU machine instead, `scripts/gpu_verify.sh sanitizers`):
#   scripts/sanitizers.sh asan [BUILD]   ASan+UBSan: the test suite (scripts/test.sh:
#                                        every gtest suite through CTest, and the pytest
#                                        suites with Python running the instrumented
#                                        libraries, ASan's runtime preloaded): every gtest
#                                        suite, the pytest suites whose time is
#                                        Backplane's C++ (see below)
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
# With clang the ASan tree also has the libFuzzer harnesses (tests/fuzz, its core built for
# coverage as well): scripts/fuzz.sh build-asan fuzzes there, and CI compiles the core,
# torch's headers and all, once for both.
fuzz=OFF
[ "$MODE" = asan ] && "$cxx" --version | grep clang >/dev/null && fuzz=ON
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
  -DBACKPLANE_PYTHON="$python" -DBACKPLANE_SANITIZE="$SANITIZE" -DBACKPLANE_CUDA=OFF -DBACKPLANE_FUZZ=$fuzz -DBACKPLANE_BUILD_TESTS=ON \
  -DBACKPLANE_CPU_CAPABILITIES="DEFAULT;$cpu_capability" \
  -DBACKPLANE_BUILD_BENCH=$([ "$MODE" = asan ] && [ "${BACKPLANE_ASAN_ALL:-}" = 1 ] && echo ON || echo OFF) >/dev/null
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
  if "$cxx" --version | grep clang >/dev/null; then
    preload=$("$cxx" -print-file-name=libclang_rt.asan-x86_64.so)  # UBSan's handlers are in it
  else
    preload="$("$cxx" -print-file-name=libasan.so) $("$cxx" -print-file-name=libubsan.so)"
  fi
  # The pytest suites whose time is Backplane's C++ driven with many inputs, said here and
  # in .ci/run: the ops against their references (conformance, opcheck, views, errors, and
  # one small graph each under torch.compile and export), gradients (the core's autograd
  # kernels and formulas), bad input of every kind (hardening/: broken plugins, YAML, CLI
  # arguments, hostile tensors, and `backplane run` and load_package on packages derived by
  # hand from one compiled package: duplicate entries, bad records, failed extraction), the
  # stable-ABI shim, the Triton-kind bridge (python/src/python_kernels.cpp), the selection
  # file's reader (FIFOs, endless files, the size cap) and the hardening of prefer/check; and
  # the npu device (allocator, streams, graphs, exit, c10d) less its Inductor and AOTInductor
  # test files and the two that spend their time in pip and a scaffold's build. The rest of
  # the suite spends its time elsewhere: Inductor and g++ compiling generated code (aoti/,
  # pipeline/, selection/'s packages, the npu compile and AOTI tests), torch's c10d
  # (distributed/), Python (docs, bench tables, the interpreted Triton kernels on NumPy) or
  # pip (scaffold wheels). Most of the C++ of ours those reach runs here through the gtest
  # suites and the files below; what does not is the AOTInductor side with real packages
  # (cli/aoti's stride and fake-class guards, `backplane run` of the aoti/ and pipeline/
  # models; the npu compile part's launches), which make test runs uninstrumented and
  # BACKPLANE_ASAN_ALL=1 here. On CI's 2-core VM under ASan the whole pytest suite took
  # 887 s, these 381 s (bench/results/test-times.md).
  # BACKPLANE_ASAN_ALL=1 runs everything make test runs.
  main_tests=(tests/python/ops tests/python/autograd tests/python/hardening tests/python/plugins/test_stable_abi.py
              tests/python/plugins/test_triton_kind.py tests/python/selection/test_hardening_selection.py
              tests/python/selection/test_selection_file_reading.py)
  npu_left_out=(tests/python/npu/test_npu_autoload.py tests/python/npu/test_npu_scaffold.py
                backends/npu/tests/test_compile.py backends/npu/tests/test_aoti.py)
  if [ "${BACKPLANE_ASAN_ALL:-}" != 1 ]; then
    export BACKPLANE_MAIN_TESTS="${main_tests[*]}" BACKPLANE_TESTS_LEFT_OUT="${npu_left_out[*]}"
    export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} -m 'not slow'"
    export BACKPLANE_SKIP_TRITON_SUITE="ASan: its kernels are interpreted Python; make test runs it"
  fi
  BACKPLANE_PYTHON_PRELOAD="$preload" \
    BACKPLANE_TEST_BACKENDS=cpu,npu scripts/test.sh "$BUILD"
  if [ "${BACKPLANE_ASAN_ALL:-}" = 1 ]; then
    echo "sanitizers: ASan+UBSan, every gtest suite and the pytest suites passed with no report"
  else
    echo "sanitizers: ASan+UBSan, every gtest suite and the pytest suites that drive Backplane's C++ (above) passed with no report"
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
