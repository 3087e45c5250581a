#!/usr/bin/env bash
# The whole test suite on the build in $1 (default build): gtest through CTest, then pytest.
# GPU-only cases skip with their reason on machines without the device.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
python=$(cat "$BUILD/.python")
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)"
PYTHONPATH=$PWD/python "$python" -m pytest tests/python -q -p no:cacheprovider -rs
