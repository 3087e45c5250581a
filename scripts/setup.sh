#!/usr/bin/env bash
# Sets up what a build needs, on a fresh machine or an old one: Debian packages
# (compiler, CMake, Ninja, GoogleTest, Google Benchmark, yaml-cpp) and a Python with
# torch >= 2.11. Writes the chosen interpreter to $BUILD/.python.
#
# Python, first that works: $TORCH_PYTHON; .venv/bin/python; the active python3 if
# it already has torch 2.11+ (the GPU machine: no network, torch preinstalled);
# otherwise a new .venv with torch==$TORCH_VERSION (default 2.14.1, the CUDA build,
# which also lets CI compile the CUDA plugin).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
TORCH_VERSION=${TORCH_VERSION:-2.14.1}

say() { printf '[setup] %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------------
missing=()
have_header() { [ -f "/usr/include/$1" ] || [ -f "/usr/local/include/$1" ]; }
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
have_header gtest/gtest.h || missing+=(libgtest-dev)
have_header benchmark/benchmark.h || missing+=(libbenchmark-dev)
have_header yaml-cpp/yaml.h || missing+=(libyaml-cpp-dev)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
    echo "[setup] need root to install: ${missing[*]} (apt-get install ${missing[*]})" >&2; exit 1
  fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi

# ccache only speeds builds up: install it where the package registry is reachable, go on
# without it elsewhere (the GPU machine has no network).
if ! command -v ccache >/dev/null && [ "$(id -u)" = 0 ] && apt-cache show ccache >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive timeout 120 apt-get install -y -q ccache >/dev/null 2>&1 ||
    say "ccache not installed (no package registry?): builds go on without it"
fi

# --- Python with torch ---------------------------------------------------------------
torch_version=""
torch_ok() {  # $1: interpreter; true when it imports torch >= 2.11 (its version: $torch_version)
  torch_version=$("$1" - <<'PY' 2>/dev/null
import sys, torch
major, minor = (int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
print(torch.__version__)
sys.exit(0 if (major, minor) >= (2, 11) else 1)
PY
)
}
python=""
if [ -n "${TORCH_PYTHON:-}" ]; then
  torch_ok "$TORCH_PYTHON" || { echo "[setup] TORCH_PYTHON=$TORCH_PYTHON has no torch >= 2.11" >&2; exit 1; }
  python=$TORCH_PYTHON
elif [ -x .venv/bin/python ] && torch_ok .venv/bin/python; then
  python=$PWD/.venv/bin/python
elif command -v python3 >/dev/null && torch_ok "$(command -v python3)"; then
  python=$(command -v python3)
else
  say "creating .venv with torch==$TORCH_VERSION (a few minutes the first time)"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check "torch==$TORCH_VERSION"
  python=$PWD/.venv/bin/python
  torch_ok "$python" || { echo "[setup] torch==$TORCH_VERSION did not install into .venv" >&2; exit 1; }
fi
# has MODULE...: true when each is installed (found, not imported: importing onnxscript or
# matplotlib alone takes seconds).
has() {
  "$python" - "$@" <<'PY' 2>/dev/null
import importlib.util, sys
sys.exit(0 if all(importlib.util.find_spec(m) is not None for m in sys.argv[1:]) else 1)
PY
}
# Test and bench tools; on a machine without network they must already be there.
# setuptools: the autoload test pip-installs the package offline (no build isolation).
if ! has pytest numpy setuptools; then
  say "installing pytest, numpy and setuptools into $python"
  "$python" -m pip install -q --disable-pip-version-check pytest numpy setuptools
fi
# Parallel test workers (scripts/test.sh). Optional: without it the tests run in one process.
if ! has xdist; then
  "$python" -m pip install -q --disable-pip-version-check --retries 1 --timeout 10 pytest-xdist ||
    say "could not install pytest-xdist: the Python tests run in one process"
fi
# The wheel (pip install . at the root) and the SDK journey: scikit-build-core. Plots of
# the benchmarks: matplotlib. Optional: without them the journey and --plot say so.
if ! has scikit_build_core matplotlib; then
  say "installing scikit-build-core and matplotlib into $python"
  # Quick to give up where there is no network (the GPU machine has matplotlib already).
  "$python" -m pip install -q --disable-pip-version-check --retries 1 --timeout 10 scikit-build-core matplotlib ||
    say "could not install scikit-build-core/matplotlib: the wheel, the SDK journey and bench plots need them"
fi
# The ONNX step of the model pipeline. Optional: where they cannot be installed (the GPU
# machine has no network) the ONNX tests skip and say why.
if ! has onnx onnxscript onnxruntime; then
  say "installing onnx, onnxscript and onnxruntime into $python"
  "$python" -m pip install -q --disable-pip-version-check onnx onnxscript onnxruntime ||
    say "could not install the ONNX packages: the ONNX step and its tests will skip"
fi
# Python's headers: the fast call extension (python/src/fast_call.cpp) needs them. Debian's
# own Python gets them from python3-dev; without them the build skips it and ops are called
# through torch.ops' generic path (backplane.info()["fast_call"] says so).
if ! "$python" -c 'import os, sysconfig; os.stat(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && apt-cache show python3-dev >/dev/null 2>&1 &&
     DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q python3-dev >/dev/null 2>&1 &&
     "$python" -c 'import os, sysconfig; os.stat(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
    say "installed python3-dev (Python's headers, for the fast call extension)"
  else
    say "no Python headers for $python: the fast call extension is not built (install python3-dev)"
  fi
fi
mkdir -p "$BUILD"
echo "$python" > "$BUILD/.python"

# --- A C++ compiler that links libstdc++ dynamically --------------------------------
# A torch extension carrying its own static libstdc++ crashes when Python opens it (the
# GPU machine's default CXX does this). The first compiler that links it dynamically:
# $CXX, c++, g++, /usr/bin/g++, clang++. The build uses it (Makefile) and says which.
links_dynamically() {  # $1: compiler
  local tmp status=1
  tmp=$(mktemp -d)
  printf '#include <string>\nstd::string backplane_probe() { return std::string(40, 0x78); }\n' >"$tmp/probe.cpp"
  if "$1" -shared -fPIC "$tmp/probe.cpp" -o "$tmp/probe.so" 2>/dev/null &&
     readelf -d "$tmp/probe.so" 2>/dev/null | grep -q 'NEEDED.*libstdc++'; then status=0; fi
  rm -rf "$tmp"
  return $status
}
cxx=""
for candidate in "${CXX:-}" c++ g++ /usr/bin/g++ clang++; do
  [ -n "$candidate" ] && command -v "$candidate" >/dev/null || continue
  if links_dynamically "$candidate"; then cxx=$(command -v "$candidate"); break; fi
  say "$candidate links libstdc++ statically (torch extensions built with it crash in Python); trying another"
done
[ -n "$cxx" ] || { echo "[setup] no C++ compiler here links libstdc++ dynamically; install g++ (apt-get install g++)" >&2; exit 1; }
echo "$cxx" > "$BUILD/.cxx"
say "C++ compiler: $cxx"
# nvcc's host compiler: $CUDAHOSTCXX where it links libstdc++ dynamically, else the same.
cuda_host=$cxx
if [ -n "${CUDAHOSTCXX:-}" ]; then
  if links_dynamically "$CUDAHOSTCXX"; then cuda_host=$CUDAHOSTCXX; else
    say "CUDAHOSTCXX=$CUDAHOSTCXX links libstdc++ statically; nvcc will use $cxx instead"; fi
fi
echo "$cuda_host" > "$BUILD/.cudahostcxx"
say "python: $python (torch $torch_version)"
