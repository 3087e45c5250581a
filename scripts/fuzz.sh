#!/usr/bin/env bash
# libFuzzer on the YAML readers and the formula grammar: scripts/fuzz.sh BUILD SECONDS
# Builds the harnesses (tests/fuzz) with clang, ASan and UBSan in BUILD (default
# build-fuzz), then runs each for SECONDS (default 60). Seeds come from
# tests/fuzz/corpus/<reader>; what the fuzzer adds goes to BUILD/fuzz/corpus/<reader>,
# a crashing input to BUILD/fuzz/artifacts/. Exits non-zero on the first finding.
# Needs clang with libFuzzer (Debian: apt-get install clang libclang-rt-14-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-fuzz}
SECONDS_EACH=${2:-60}
CLANG=${CLANG:-$(command -v clang++ || command -v clang++-14 || true)}
[ -n "$CLANG" ] || { echo "fuzz.sh: clang++ not found; apt-get install clang libclang-rt-14-dev" >&2; exit 1; }
python=${TORCH_PYTHON:-$( [ -f build/.python ] && cat build/.python || command -v python3 )}
generator=$(command -v ninja >/dev/null && echo "-G Ninja" || true)

# Only the core and the harnesses: plugins, tests and benchmarks are not fuzzed.
cmake -S . -B "$BUILD" $generator -DCMAKE_CXX_COMPILER="$CLANG" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DBACKPLANE_PYTHON="$python" -DBACKPLANE_FUZZ=ON -DBACKPLANE_BUILD_TESTS=OFF -DBACKPLANE_BUILD_BENCH=OFF \
  -DBACKPLANE_CUDA=OFF
readers=(registry classes manifest formula)
cmake --build "$BUILD" --parallel --target "${readers[@]/#/backplane_fuzz_}"

mkdir -p "$BUILD/fuzz/artifacts"
for reader in "${readers[@]}"; do
  corpus="$BUILD/fuzz/corpus/$reader"
  mkdir -p "$corpus"
  echo "fuzzing the $reader reader for ${SECONDS_EACH}s"
  # detect_leaks=0: libtorch's static registrations are never freed, by design.
  ASAN_OPTIONS=detect_leaks=0 "$BUILD/bin/backplane_fuzz_$reader" "$corpus" "tests/fuzz/corpus/$reader" \
    -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$BUILD/fuzz/artifacts/$reader-" \
    -print_final_stats=1
done
