#!/usr/bin/env bash
# `make bench`: every op on the default backends (BACKPLANE_BACKENDS, else cpu), the table,
# its JSON and its plot, in the Python environment the tests and the demo share.
#   scripts/bench.sh [BUILD] [backplane bench flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build
if [ $# -gt 0 ] && [[ $1 != -* ]]; then
  BUILD=$1
  shift
fi
python=$(cat "$BUILD/.python")
source scripts/python_env.sh
BACKPLANE_PYTHON=$python exec "$BUILD/bin/backplane" bench --repetitions 3 --json "$BUILD/bench.json" \
  --plot "$BUILD/bench.png" "$@"
