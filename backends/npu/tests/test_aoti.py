"""AOTInductor packages for the npu device: compiled with torch's aoti_compile_and_package
from npu inputs, run from Python (backplane.load_package, under the input layout guard)
and from C++ (`backplane run`), equal to eager; the generated kernels queued on the
device's streams in order with eager work.

Copied into every PrivateUse1 scaffold (renamed). Each package compiles once per module
(an AOTInductor compile takes seconds); the tests share it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
import torch

import backplane
from backplane.aoti import layouts
from backplane.aoti.layouts import add_layouts
from backplane.aoti.libstdcxx import choose_cxx

backplane.load("npu")

DEVICE = "npu"
DEV = getattr(torch, DEVICE)
BATCHES = (2, 5, 64)  # the traced batch is 5; the package takes 2..64


class Model(torch.nn.Module):
    """Fused elementwise work around an addmm (an extern call through the device's C
    shim) with a weight, a bias and a buffer as constants."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 8)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        return torch.nn.functional.silu(self.lin(x * 2 + 1)) * self.scale + x.sum(-1, keepdim=True)


def _package(model: torch.nn.Module, example: torch.Tensor, path: Path) -> Path:
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(model, (example,), dynamic_shapes=({0: batch},))
    # A compiler that links libstdc++ dynamically (docs/aoti-findings.md), as the pipeline.
    with torch._inductor.config.patch({"cpp.cxx": (None, choose_cxx(None))}):
        torch._inductor.aoti_compile_and_package(ep, package_path=str(path))
    add_layouts(path, ep)
    return path


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Model().to(DEVICE).eval()


@pytest.fixture(scope="module")
def package(model, tmp_path_factory):
    with torch.no_grad():
        return _package(model, torch.randn(5, 16, device=DEVICE), tmp_path_factory.mktemp("aoti") / "model.pt2")


@pytest.fixture(scope="module")
def loaded(package):
    return backplane.load_package(package)


def _eager(model, x):
    with torch.no_grad():
        return model(x).cpu()


def _close(got: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", BATCHES)
def test_the_package_equals_eager(model, loaded, batch):
    x = torch.randn(batch, 16, device=DEVICE)
    out = loaded(x)
    assert out.device == x.device
    _close(out, _eager(model, x))


def test_the_generated_code_queues_fused_kernels_and_calls_the_device(package):
    with zipfile.ZipFile(package) as z:
        [wrapper] = [n for n in z.namelist() if n.endswith(".wrapper.cpp")]
        code = z.read(wrapper).decode()
    # Fused kernels are launched on the stream, never called on device addresses.
    assert f'backplane_{DEVICE}_aoti::launch(' in code and '"cpp_fused_' in code
    assert ".data_ptr()" not in code
    # The addmm is a C shim of the package's own, a call through the dispatcher.
    assert f"AOTITorchError aoti_torch_{DEVICE}_addmm_out(" in code and "at::addmm_out(" in code
    # Buffers are device memory.
    assert "cached_torch_device_type_privateuse1" in code


def test_constants_live_in_device_memory(package, model):
    DEV.synchronize()
    before = DEV.memory_allocated(0)
    run = backplane.load_package(package)
    # Inductor inlines small constants as literals; the ones it kept are on the device.
    kept = dict(model.state_dict())
    names = run.compiled.get_constant_fqns()
    assert "lin.weight" in names
    assert DEV.memory_allocated(0) - before >= sum(kept[n].nbytes for n in names)
    del run


def test_queued_work_and_the_package_run_in_stream_order(model, loaded):
    # Held, the stream runs nothing: a write to x, the package and a read of its output
    # are all queued behind the hold, in that order, before any of them runs (only ops
    # that queue: device-to-device copies; a copy from the host waits). Had the package
    # read x before the write, or the read overtaken the package, the numbers would differ.
    source = torch.randn(7, 16, device=DEVICE)
    x = torch.zeros(7, 16, device=DEVICE)
    read = torch.empty(7, 8, device=DEVICE)
    waited = threading.Event()
    hold = DEV._hold_stream()

    def release_if_blocked():  # a package that waited for the held stream would hang
        waited.set()
        hold.release()

    timer = threading.Timer(30, release_if_blocked)
    timer.start()
    try:
        x.copy_(source)
        out = loaded(x)
        read.copy_(out)
    finally:
        timer.cancel()
        hold.release()
    assert not waited.is_set(), "the package waited for work queued before it (a host synchronization)"
    expected = _eager(model, source)
    _close(out, expected)
    _close(read, expected)


def test_inputs_in_other_layouts_are_converted_and_wrong_ones_refused(model, loaded):
    x = torch.randn(16, 9, device=DEVICE).t()  # transposed: other strides, same values
    _close(loaded(x), _eager(model, x.contiguous()))
    assert loaded.converted and "input 0" in loaded.converted[0]
    with pytest.raises(layouts.LayoutError, match=f"device cpu is not {DEVICE}|{DEVICE}"):
        loaded(torch.randn(4, 16))
    with pytest.raises(layouts.LayoutError, match="dtype"):
        loaded(torch.randn(4, 16, device=DEVICE, dtype=torch.float64))


def test_another_device_index(package, model):
    if DEV.device_count() < 2:
        pytest.skip(f"one {DEVICE} device")
    run = torch._inductor.aoti_load_package(str(package), device_index=1)
    x = torch.randn(3, 16, device=f"{DEVICE}:1")
    out = run(x)
    assert out.device == x.device
    _close(out, _eager(model, x.to(f"{DEVICE}:0")))


def _has_kernel(op: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"backplane::{op}", "PrivateUse1")


@pytest.mark.skipif(not _has_kernel("add"), reason=f"backplane::add has no {DEVICE} kernel yet")
def test_backplane_ops_run_through_the_proxy_executor(tmp_path):
    class WithOp(torch.nn.Module):
        def forward(self, x):
            return torch.ops.backplane.add(x.relu(), x * 0.5, alpha=2.0) * 3

    model = WithOp()
    path = _package(model, torch.randn(5, 16, device=DEVICE), tmp_path / "op.pt2")
    x = torch.randn(9, 16, device=DEVICE)
    _close(backplane.load_package(path)(x), _eager(model, x))
    with zipfile.ZipFile(path) as z:
        nodes = [n for n in z.namelist() if n.endswith(".json") and "backplane" in z.read(n).decode()]
    assert nodes, "expected backplane::add among the proxy executor's nodes"


def _backplane_binary() -> str | None:
    found = os.environ.get("BACKPLANE_BIN") or shutil.which("backplane")
    return found if found and Path(found).is_file() else None


def _reference_file(model, folder: Path) -> Path:
    """The inputs and expected outputs `backplane run` checks a package against."""
    cases = []
    for batch in BATCHES:
        x = torch.randn(batch, 16)
        cases.append({"batch": batch, "inputs": [x], "expected": [_eager(model, x.to(DEVICE))]})
    io = folder / "model.io.pt"
    torch.save({"model": "test_aoti", "device": DEVICE, "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
                "cases": cases}, io)
    return io


@pytest.mark.skipif(_backplane_binary() is None, reason="the backplane command is not built (BACKPLANE_BIN)")
def test_backplane_run_from_cpp_equals_eager(model, package, tmp_path):
    result = subprocess.run([_backplane_binary(), "run", str(package), "--backends", DEVICE, "--input",
                             str(_reference_file(model, tmp_path)), "--repeat", "2"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"for {DEVICE}" in result.stdout
    assert result.stdout.count("matches within tolerance") == len(BATCHES), result.stdout


def test_a_process_without_the_device_is_told_which_plugin_to_load(model, package, tmp_path):
    env = {**os.environ, "BACKPLANE_BACKENDS": "none", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    code = "import sys, backplane; backplane.load_package(sys.argv[1])"
    result = subprocess.run([sys.executable, "-c", code, str(package)], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode != 0
    assert f"the package runs on {DEVICE}, a device this process does not have" in result.stderr, result.stderr[-2000:]
    assert f"backplane.load('{DEVICE}')" in result.stderr
    if _backplane_binary() is None:
        return
    result = subprocess.run([_backplane_binary(), "run", str(package), "--backends", "none", "--input",
                             str(_reference_file(model, tmp_path))], capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"the package runs on {DEVICE}, a device no loaded plugin provides" in result.stderr, result.stderr
    assert f"--backends {DEVICE}" in result.stderr
