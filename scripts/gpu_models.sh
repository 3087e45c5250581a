#!/usr/bin/env bash
# The model pipeline on the GPU machine (after `make build` or scripts/gpu_verify.sh):
# both models through eager, torch.compile, torch.export, AOTInductor, loading the
# package in Python and running it from C++ (`backplane run`), on cuda and cpu; then the
# AOTInductor guard tests. Runs under the machine's own default CXX, the one whose static
# libstdc++ made aoti_load_package segfault, so the pipeline's compiler choice and
# package checks are what is tested. ONNX is skipped there: no onnx packages, no network.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
B=build
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python BACKPLANE_LIB_DIR=$PWD/$B/lib BACKPLANE_BIN=$PWD/$B/bin/backplane
python=python3 BUILD=$B source scripts/python_env.sh
echo "CXX=${CXX:-unset} ($(command -v g++))"; python3 -c 'import torch; print("torch", torch.__version__)'; date -u
for device in ${DEVICES:-cuda cpu}; do
  for model in ${MODELS:-identity decoder_block}; do
    for step in ${STEPS:-eager compile export aoti load cpp}; do
      echo "== $step $model $device"
      timeout 300 python3 -m models.pipeline $step $model --device $device --out /tmp/gpu-models 2>&1 | tail -12
      echo "rc=${PIPESTATUS[0]}"
    done
  done
done
if [ -z "${SKIP_GUARDS:-}" ]; then
  timeout 400 python3 -m pytest tests/python/aoti/test_aoti_guards.py tests/python/ops/test_custom_class.py -q -rs -s -k "${GUARDS_K:-not nothing}" \
    -p no:cacheprovider > "$OUT/guards.log" 2>&1; echo "guards pytest rc=$?"; grep -E "static-libstdc|passed|failed|Error" "$OUT/guards.log" | tail -8
fi
