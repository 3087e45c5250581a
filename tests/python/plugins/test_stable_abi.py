"""Kernel plugins on PyTorch's stable ABI (backplane/stable_kernel.h, stable_api.h): the
fixture cpu_stable (tests/fixtures/stable/stable_plugin.cpp: mul, add with its Scalar
alpha, crop with its int[4] box, identity_conv, scale_) loads through the core's C interface, passes the conformance suite and opcheck, shares a
device with cpu through the core's selection, and the loader's version rule holds. The
CUDA fixture cuda_stable (stable_cuda_plugin.cu, TORCH_TARGET 2.11) does the same on a GPU,
on the caller's stream and device. cpu_stable_v1 (v1_plugin.cpp) is a plugin built against
the interface's version 1, which must keep loading.

BACKPLANE_STABLE_PLUGIN_DIR names another build of cpu_stable: the SDK journey sets it to
one built against an older torch's headers (scripts/sdk_journey.sh, step 7), and these
tests then prove that binary under this build's torch. BACKPLANE_STABLE_CUDA_PLUGIN_DIR does
the same for cuda_stable (one built on newer headers than the torch running it)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import backplane
from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"
PLUGIN_DIR = Path(os.environ.get("BACKPLANE_STABLE_PLUGIN_DIR", FIXTURES))
CUDA_PLUGIN_DIR = Path(os.environ.get("BACKPLANE_STABLE_CUDA_PLUGIN_DIR", FIXTURES))
CPU_OPS = ("mul", "add", "crop", "identity_conv", "scale_")
CUDA_OPS = ("mul", "identity_conv", "scale_")
PROGRAMS = Path(__file__).with_name("programs")

needs_cpu_stable = pytest.mark.skipif(not (PLUGIN_DIR / "libbackplane_cpu_stable.so").is_file(),
                                      reason=f"no cpu_stable plugin in {PLUGIN_DIR}")
needs_cuda_stable = pytest.mark.skipif(not (CUDA_PLUGIN_DIR / "libbackplane_cuda_stable.so").is_file(),
                                       reason=f"no cuda_stable plugin in {CUDA_PLUGIN_DIR} (a build without CUDA)")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="cuda_stable runs on a GPU; none here")


def _child(program, *args, **env):
    """Runs program (text, or a file of programs/ given args) with no plugin loaded but its own."""
    done = run_python(program, *args, env={"BACKPLANE_BACKENDS": "none", **env})  # only what the code loads
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@needs_cpu_stable
def test_the_manifest_says_stable_and_names_its_target():
    text = (PLUGIN_DIR / "libbackplane_cpu_stable.manifest.yaml").read_text()
    assert "torch_abi: stable" in text
    built_for = os.environ.get("BACKPLANE_STABLE_TARGET", backplane.info()["torch"])
    assert f'torch_version: "{built_for}"' in text


def _undefined_symbols(library):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    return subprocess.run([nm, "-D", "--undefined-only", str(library)], capture_output=True, text=True,
                          check=True).stdout.split()


@pytest.mark.parametrize("plugin", [
    pytest.param(PLUGIN_DIR / "libbackplane_cpu_stable.so", marks=needs_cpu_stable, id="cpu_stable"),
    pytest.param(CUDA_PLUGIN_DIR / "libbackplane_cuda_stable.so", marks=needs_cuda_stable, id="cuda_stable"),
    pytest.param(FIXTURES / "libbackplane_cpu_stable_v1.so", id="cpu_stable_v1"),
])
def test_the_binary_needs_no_libtorch_cpp_symbol(plugin):
    # Only the stable C shim (aoti_torch_*, torch_*) may cross: a C++ symbol of c10, at or
    # torch ties the binary to one torch's layout.
    undefined = _undefined_symbols(plugin)
    assert not [s for s in undefined if s.startswith(("_ZN3c10", "_ZN2at", "_ZN5torch"))]
    assert any(s.startswith("aoti_torch_") for s in undefined)


@pytest.mark.parametrize("plugin,directory,device,plugin_ops", [
    pytest.param("cpu_stable", PLUGIN_DIR, "cpu", CPU_OPS, marks=needs_cpu_stable, id="cpu_stable"),
    pytest.param("cuda_stable", CUDA_PLUGIN_DIR, "cuda", CUDA_OPS, marks=[needs_cuda_stable, needs_gpu],
                 id="cuda_stable"),
])
def test_conformance_and_opcheck(plugin, directory, device, plugin_ops):
    _child(PROGRAMS / "stable_conformance_and_opcheck.py", plugin, directory, device, *plugin_ops)


def test_a_plugin_built_against_interface_version_1_keeps_loading_and_serving():
    # tests/fixtures/stable/v1_plugin.cpp: built on the frozen version-1 header, offering mul
    # through offer_kernel as plugins of that time do.
    _child(PROGRAMS / "stable_v1_plugin.py", FIXTURES)


@needs_cpu_stable
def test_views_and_broadcasting_are_computed_in_place_of_any_layout():
    _child(PROGRAMS / "stable_views_and_broadcasting.py", PLUGIN_DIR)


@needs_cpu_stable
def test_it_shares_a_device_with_cpu_through_the_core():
    out = _child(PROGRAMS / "stable_shares_cpu.py", PLUGIN_DIR, TORCHINDUCTOR_VEC_ISA_OK="1")
    assert "ok" in out


def _copy_with_manifest(tmp_path, change):
    for suffix in (".so", ".manifest.yaml"):
        shutil.copy(PLUGIN_DIR / f"libbackplane_cpu_stable{suffix}", tmp_path)
    manifest = tmp_path / "libbackplane_cpu_stable.manifest.yaml"
    manifest.write_text(change(manifest.read_text()))
    return tmp_path


@needs_cpu_stable
def test_a_torch_older_than_the_target_is_refused_naming_both(tmp_path):
    here = backplane.info()["torch"]
    major, minor = map(int, here.split("."))
    later = f"{major}.{minor + 1}"
    directory = _copy_with_manifest(tmp_path, lambda t: t.replace(
        next(line for line in t.splitlines() if line.startswith("torch_version:")), f'torch_version: "{later}"'))
    out = _child(f"""
import backplane
try:
    backplane.load("cpu_stable", path={str(directory)!r})
except backplane.BackendError as e:
    print(e)
""")
    assert (f"built on torch's stable ABI for torch {later} and later, this process runs torch {here}, "
            "which is older") in out


@needs_cpu_stable
def test_a_full_abi_plugin_claiming_stable_is_refused(tmp_path):
    # cpu_alt is built on the full ABI: it exports no backplane_stable_plugin_init.
    for suffix in (".so", ".manifest.yaml"):
        shutil.copy(FIXTURES / f"libbackplane_cpu_alt{suffix}", tmp_path)
    manifest = tmp_path / "libbackplane_cpu_alt.manifest.yaml"
    manifest.write_text(manifest.read_text() + "torch_abi: stable\n")
    out = _child(f"""
import backplane
try:
    backplane.load("cpu_alt", path={str(tmp_path)!r})
except backplane.BackendError as e:
    print(e)
""")
    assert "exports no backplane_stable_plugin_init" in out, out


# cuda_stable: the CUDA key through the stable path.


@needs_cuda_stable
def test_the_cuda_plugin_targets_torch_2_11():
    # Built with TORCH_TARGET 2.11 on whatever newer headers the build has.
    text = (CUDA_PLUGIN_DIR / "libbackplane_cuda_stable.manifest.yaml").read_text()
    assert "torch_abi: stable" in text and 'torch_version: "2.11"' in text and "dispatch_key: CUDA" in text, text


@needs_cuda_stable
@needs_gpu
def test_cuda_kernels_run_on_the_callers_stream_and_in_a_graph():
    # A kernel on any stream but the current one races the caller's work and breaks capture.
    _child(PROGRAMS / "stable_cuda_stream_and_graph.py", CUDA_PLUGIN_DIR)


@needs_cuda_stable
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs (cuda:1)")
def test_cuda_kernels_run_on_the_inputs_device():
    _child(f"""
import torch, backplane
backplane.load("cuda_stable", path={str(CUDA_PLUGIN_DIR)!r})
a, b = torch.randn(3, 1000, device="cuda:1"), torch.randn(1000, device="cuda:1")
assert torch.cuda.current_device() == 0
out = torch.ops.backplane.mul(a, b)
assert out.device == torch.device("cuda:1")
torch.testing.assert_close(out, a * b, rtol=0, atol=0)
print("ok")
""")


@needs_cuda_stable
@needs_gpu
def test_cuda_shares_the_device_with_cuda_through_the_core():
    _child(f"""
import warnings, torch, backplane
warnings.simplefilter("ignore")
backplane.load("cuda")
backplane.load("cuda_stable", path={str(CUDA_PLUGIN_DIR)!r})
(s,) = [s for s in backplane.serving() if s.op == "mul" and s.dispatch_key == "CUDA"]
assert s.offered_by == ("cuda", "cuda_stable"), s
with backplane.prefer("mul", "cuda_stable"):
    a, b = torch.randn(3, 4, device="cuda"), torch.randn(4, device="cuda")
    assert torch.equal(torch.ops.backplane.mul(a, b), a * b)
print("ok")
""")


@needs_cpu_stable
def test_add_alpha_past_int64_computes_as_the_full_abi_plugin_does():
    """alpha=2**63 is an unsigned Scalar: it crossed as an int64 and died in c10's bare overflow
    message; it now crosses as a double, as the cpu plugin reads it."""
    _child(f"""
import torch, backplane
backplane.load("cpu_stable", path={str(PLUGIN_DIR)!r})
a, b = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
for alpha in (2**63, 2**64 - 1):
    torch.testing.assert_close(torch.ops.backplane.add(a, b, alpha=alpha), torch.add(a, b, alpha=alpha))
print("ok")
""")
