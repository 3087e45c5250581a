#!/usr/bin/env bash
# libFuzzer on the YAML readers (registry, classes, manifest, selection file) and the formula
# grammar: scripts/fuzz.sh BUILD SECONDS
# Builds the harnesses (tests/fuzz) with clang, ASan and UBSan in BUILD (default
# build-fuzz; or the ASan tree, build-asan, which has them: see below), then runs each for
# SECONDS (default 60). Seeds come from
# tests/fuzz/corpus/<reader>; what the fuzzer adds goes to BUILD/fuzz/corpus/<reader>,
# a crashing input to BUILD/fuzz/artifacts/. Runs one harness a core at a time, tune's
# JSON reader (Python) among them; exits non-zero when any found something.
# Needs clang with libFuzzer (Debian: apt-get install clang libclang-rt-14-dev).
# BACKPLANE_BUILD_ONLY=1: configure and build the harnesses, fuzz nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-fuzz}
SECONDS_EACH=${2:-60}
CLANG=${CLANG:-$(command -v clang++ || command -v clang++-14 || true)}
[ -n "$CLANG" ] || { echo "fuzz.sh: clang++ not found; apt-get install clang libclang-rt-14-dev" >&2; exit 1; }
python=${TORCH_PYTHON:-$( [ -f build/.python ] && cat build/.python || command -v python3 )}
generator=$(command -v ninja >/dev/null && echo "-G Ninja" || true)

# The ASan+UBSan tree that scripts/sanitizers.sh asan configures with clang has the harnesses
# (its core is instrumented for coverage too): given that tree, the harnesses build there as
# it is configured, and CI compiles the core once for both. Any other BUILD is configured
# with only the core and the harnesses: plugins, tests and benchmarks are not fuzzed.
if grep -qs '^BACKPLANE_FUZZ:BOOL=ON' "$BUILD/CMakeCache.txt" && grep -qs '^BACKPLANE_SANITIZE:STRING=address' "$BUILD/CMakeCache.txt"; then
  echo "fuzz: the harnesses of the ASan+UBSan tree $BUILD (scripts/sanitizers.sh asan)"
  # That tree links ASan's runtime as a shared library (for the Python processes that load
  # its plugins), which must come first in a harness's library list: preloaded, as there.
  tree_cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  asan_preload=$("$tree_cxx" -print-file-name=libclang_rt.asan-x86_64.so)
elif [ -f "$BUILD/CMakeCache.txt" ] && ! grep -qs '^BACKPLANE_FUZZ:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  # Configuring another tree (build, or an ASan tree built with g++) for the harnesses would
  # turn its tests off and its compiler to clang, wiping what it holds.
  echo "fuzz.sh: $BUILD is a build tree without the harnesses (BACKPLANE_FUZZ is not ON in its" \
    "CMakeCache.txt); give a tree of its own (default build-fuzz), or build-asan after" \
    "scripts/sanitizers.sh asan has configured it with clang" >&2
  exit 2
else
  cmake -S . -B "$BUILD" $generator -DCMAKE_CXX_COMPILER="$CLANG" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBACKPLANE_PYTHON="$python" -DBACKPLANE_FUZZ=ON -DBACKPLANE_BUILD_TESTS=OFF -DBACKPLANE_BUILD_BENCH=OFF \
    -DBACKPLANE_CUDA=OFF
fi
readers=(registry classes manifest selection formula)
build_start=$SECONDS
cmake --build "$BUILD" --parallel --target "${readers[@]/#/backplane_fuzz_}"
echo "[fuzz] build: $(( SECONDS - build_start )) s"
[ "${BACKPLANE_BUILD_ONLY:-}" = 1 ] && exit 0

mkdir -p "$BUILD/fuzz/artifacts"
# One fuzzer a core at a time (each is single-threaded): the same time per reader, in
# less wall time. Each one's output is printed when it ends, whole.
fuzz_one() {
  local reader=$1 corpus="$BUILD/fuzz/corpus/$1"
  if [ "$reader" = tune_json ]; then
    # tune's JSON reader is Python: seeded mutations for a fixed count (at most 45 s), on
    # the build the tests use (build/lib); a finding's input goes to $BUILD/fuzz/artifacts/.
    "$python" tests/fuzz/tune_json_reader.py --artifacts "$BUILD/fuzz/artifacts" > "$BUILD/fuzz/$reader.log" 2>&1
    return
  fi
  mkdir -p "$corpus"
  # detect_leaks=0: libtorch's static registrations are never freed, by design.
  LD_PRELOAD=${asan_preload:-} ASAN_OPTIONS=detect_leaks=0 "$BUILD/bin/backplane_fuzz_$reader" "$corpus" "tests/fuzz/corpus/$reader" \
    -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$BUILD/fuzz/artifacts/$reader-" \
    -print_final_stats=1 > "$BUILD/fuzz/$reader.log" 2>&1
}
# tune's JSON reader (tests/fuzz/tune_json_reader.py) is one more single-threaded job in
# the batches: with five harnesses on two cores the last batch would otherwise leave a
# core idle while it runs, and the Python reader would then run alone after them.
jobs_list=("${readers[@]}" tune_json)
jobs=$(nproc)
failed=()
for ((i = 0; i < ${#jobs_list[@]}; i += jobs)); do
  batch=("${jobs_list[@]:i:jobs}")
  pids=()
  for reader in "${batch[@]}"; do
    if [ "$reader" = tune_json ]; then echo "fuzzing tune's JSON reader (tests/fuzz/tune_json_reader.py)"
    else echo "fuzzing the $reader reader for ${SECONDS_EACH}s"; fi
    fuzz_one "$reader" & pids+=($!)
  done
  for k in "${!batch[@]}"; do
    wait "${pids[k]}" || failed+=("${batch[k]}")
    echo "--- ${batch[k]}:"; cat "$BUILD/fuzz/${batch[k]}.log"
  done
done
if (( ${#failed[@]} )); then
  echo "fuzz.sh: a finding in: ${failed[*]} (inputs in $BUILD/fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz: ${#jobs_list[@]} passed, 0 failed"
