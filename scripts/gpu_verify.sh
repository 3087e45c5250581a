#!/usr/bin/env bash
# One call on the GPU machine (no network; torch preinstalled): build with the CUDA
# plugin, run the conformance suite and the CUDA pytest cases, take the Python-side
# figures, then compute-sanitizer memcheck and racecheck over the CUDA conformance
# suite. Logs go to $OUT (the device tool's output folder) or ./gpu-out.
#   GPU_DEPS=dir       yaml-cpp, GoogleTest and Google Benchmark for a machine that has
#                      none: scripts/pack_gpu_deps.sh makes .gpu/ (carry it). With
#                      GoogleTest there, the gtest suites and the C++ benchmarks run too.
#   YAML_CPP_DIR=dir   only a yaml-cpp package (.gpu/yaml-cpp): no gtest, no C++ benchmarks
#   SKIP_PY_BENCH=1    skip the Python-side figures; SANITIZERS="" skips compute-sanitizer;
#   SKIP_BENCH=1 skips the C++ benchmarks, SKIP_PYTEST=1 the pytest cases
# The machine's default CXX links libstdc++ statically, which crashes in Python
# (cmake/CheckDynamicLibstdcxx.cmake): build with the system g++.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
B=build-gpu
export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python BACKPLANE_LIB_DIR=$PWD/$B/lib
nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__)'; date -u
t0=$(date +%s)
deps=()
tests=OFF
if [ -n "${GPU_DEPS:-}" ]; then
  arch=$GPU_DEPS/prefix/lib/x86_64-linux-gnu
  deps=(-Dyaml-cpp_DIR=$GPU_DEPS/yaml-cpp -DGTest_DIR=$arch/cmake/GTest -Dbenchmark_DIR=$arch/cmake/benchmark)
  export LD_LIBRARY_PATH=$arch:$GPU_DEPS/yaml-cpp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  [ -d "$arch/cmake/GTest" ] && tests=ON
elif [ -n "${YAML_CPP_DIR:-}" ]; then  # yaml-cpp alone (how the recorded runs were made)
  deps=(-Dyaml-cpp_DIR=$YAML_CPP_DIR)
fi
cmake -S . -B $B -G Ninja -DBACKPLANE_PYTHON="$(command -v python3)" "${deps[@]}" \
  -DBACKPLANE_BUILD_TESTS=$tests -DBACKPLANE_BUILD_BENCH=$tests -DBACKPLANE_CUDA=ON > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
ninja -C $B -k 0 > "$OUT/build.log" 2>&1 || { grep -m3 -A15 error "$OUT/build.log"; [ -x $B/bin/backplane ] || exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
$B/bin/backplane list
timeout 120 $B/bin/backplane check > "$OUT/check.log" 2>&1; echo "check rc=$?"; grep -v "^    " "$OUT/check.log"
if [ $tests = ON ]; then
  BACKPLANE_TEST_BACKENDS=cpu,cuda,npu timeout 200 ctest --test-dir $B -j 8 > "$OUT/ctest.log" 2>&1
  echo "ctest rc=$?"; tail -3 "$OUT/ctest.log"
  grep -E "\*\*\*|Failed " "$OUT/ctest.log" | head -12
  [ -z "${SKIP_BENCH:-}" ] && timeout 200 $B/bin/backplane_bench --backends=cpu,cuda --benchmark_filter=/cuda/ --benchmark_min_time=0.1 \
    --benchmark_out="$OUT/bench.json" --benchmark_out_format=json > /dev/null 2>&1
  [ -z "${SKIP_BENCH:-}" ] && echo "bench rc=$?" && python3 bench/report.py "$OUT/bench.json" --plot "$OUT/bench.png" > "$OUT/bench.md" 2>&1
  tail -30 "$OUT/bench.md"
fi
[ -z "${SKIP_PYTEST:-}" ] && { timeout 200 python3 -m pytest tests/python/test_cuda.py tests/python/test_api.py tests/python/test_opcheck.py tests/python/test_npu.py \
  -q -rs -p no:cacheprovider > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -4 "$OUT/pytest.log"; }
if [ -z "${SKIP_PY_BENCH:-}" ]; then
timeout 150 python3 bench/python_bench.py --device cuda --json "$OUT/python_bench.json" > "$OUT/python_bench.md" 2>&1
echo "python_bench rc=$?"; cat "$OUT/python_bench.md"
# Variants of the vectorized elementwise kernel (backends/cuda/kernels/launch_config.cuh).
for knob in BACKPLANE_CUDA_STREAMING BACKPLANE_CUDA_FULL_GRID; do
  env $knob=1 timeout 60 python3 bench/python_bench.py --device cuda --only elementwise > "$OUT/$knob.md" 2>&1
  echo "== $knob=1 rc=$?"; tail -5 "$OUT/$knob.md"
done
fi
tools=${SANITIZERS-memcheck racecheck}
for tool in $tools; do
  timeout 90 compute-sanitizer --tool $tool --print-limit 10 $B/bin/backplane check --backends cuda \
    > "$OUT/$tool.log" 2>&1; echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|all checks|FAILED" "$OUT/$tool.log" | head -5
done
