#!/usr/bin/env bash
# The whole test suite on the build in $1 (default build): gtest through CTest, then pytest.
# GPU-only cases skip with their reason on machines without the device.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
python=$(cat "$BUILD/.python")
# The conformance suite runs on every backend the build made; where a device is
# missing, its cases skip with the reason.
backends=cpu
[ -f "$BUILD/lib/libbackplane_npu.so" ] && backends=$backends,npu
[ -f "$BUILD/lib/libbackplane_cuda.so" ] && backends=$backends,cuda
export BACKPLANE_TEST_BACKENDS=${BACKPLANE_TEST_BACKENDS:-$backends}
echo "conformance backends: $BACKPLANE_TEST_BACKENDS"
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)"
# The npu tests in a process of their own: a registered PrivateUse1 device becomes
# torch's "accelerator" (torch.accelerator, default pin_memory device), which the
# CUDA tests must not see.
npu_tests=(tests/python/test_npu.py tests/python/test_npu_autoload.py backends/npu/tests/test_device.py)
PYTHONPATH=$PWD/python "$python" -m pytest tests/python -q -p no:cacheprovider -rs "${npu_tests[@]/#/--ignore=}"
PYTHONPATH=$PWD/python "$python" -m pytest "${npu_tests[@]}" -q -p no:cacheprovider -rs
