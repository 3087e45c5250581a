#!/usr/bin/env bash
# One call on the GPU machine (no network; torch preinstalled): build with the CUDA
# plugin, run the conformance suite and the CUDA pytest cases, take the Python-side
# figures, then compute-sanitizer memcheck and racecheck over the CUDA conformance
# suite. Logs go to $OUT (the device tool's output folder) or ./gpu-out.
#   YAML_CPP_DIR=dir   a yaml-cpp CMake package where the machine has none
#                      (scripts/pack_yaml_cpp.sh makes one in .gpu/yaml-cpp; carry .gpu)
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
cmake -S . -B $B -G Ninja -DBACKPLANE_PYTHON="$(command -v python3)" ${YAML_CPP_DIR:+-Dyaml-cpp_DIR=$YAML_CPP_DIR} \
  -DBACKPLANE_BUILD_TESTS=OFF -DBACKPLANE_BUILD_BENCH=OFF -DBACKPLANE_CUDA=ON > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
ninja -C $B > "$OUT/build.log" 2>&1 || { grep -m3 -A15 error "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
$B/bin/backplane list
timeout 120 $B/bin/backplane check > "$OUT/check.log" 2>&1; echo "check rc=$?"; grep -v "^    " "$OUT/check.log"
timeout 200 python3 -m pytest tests/python/test_cuda.py tests/python/test_api.py tests/python/test_opcheck.py \
  -q -rs -p no:cacheprovider > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -4 "$OUT/pytest.log"
timeout 150 python3 bench/python_bench.py --device cuda --json "$OUT/python_bench.json" > "$OUT/python_bench.md" 2>&1
echo "python_bench rc=$?"; cat "$OUT/python_bench.md"
# Variants of the vectorized elementwise kernel (backends/cuda/kernels/launch_config.cuh).
for knob in BACKPLANE_CUDA_STREAMING BACKPLANE_CUDA_FULL_GRID; do
  env $knob=1 timeout 60 python3 bench/python_bench.py --device cuda --only elementwise > "$OUT/$knob.md" 2>&1
  echo "== $knob=1 rc=$?"; tail -5 "$OUT/$knob.md"
done
tools=${SANITIZERS-memcheck racecheck}
for tool in $tools; do
  timeout 90 compute-sanitizer --tool $tool --print-limit 10 $B/bin/backplane check --backends cuda \
    > "$OUT/$tool.log" 2>&1; echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|all checks|FAILED" "$OUT/$tool.log" | head -5
done
