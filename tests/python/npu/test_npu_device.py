"""The npu device (PrivateUse1, emulated) from Python: the device module and tensor
methods, tensors to, from and between its devices, the current device, the device count,
and loading the plugin."""
import subprocess

import pytest
import torch

import backplane
from conftest import run_python
from npu_common import QUIET_FALLBACK, same
from samples import DTYPES

pytestmark = QUIET_FALLBACK


def test_device_module_and_tensor_methods():
    assert torch._C._get_privateuse1_backend_name() == "npu"
    assert torch.npu.is_available()
    assert torch.npu.device_count() == 2
    x = torch.ones(3).npu()
    assert x.is_npu and x.device == torch.device("npu", 0)
    assert not torch.ones(3).is_npu
    layer = torch.nn.Linear(2, 2).npu()
    assert layer.weight.device.type == "npu"


@pytest.mark.parametrize("dtype", [*DTYPES, torch.int64, torch.int8, torch.bool, torch.complex64], ids=str)
def test_round_trip_through_both_devices(dtype):
    host = (torch.arange(30) % 7).to(dtype).view(5, 6)
    on0 = host.to("npu:0")
    on1 = on0.to("npu:1")
    assert (on0.device, on1.device) == (torch.device("npu:0"), torch.device("npu:1"))
    same(on1, host)
    same(on1.t().to("npu:0"), host.t())  # a transposed view across devices
    same(on0[1:, ::2], host[1:, ::2])  # an offset, strided view


def test_views_resize_set_and_scalars():
    x = torch.arange(12.0, device="npu")
    same(x.view(3, 4).t()[1], torch.arange(12.0).view(3, 4).t()[1])
    same(x.unfold(0, 4, 4), torch.arange(12.0).unfold(0, 4, 4))
    assert x[5].item() == 5.0
    y = torch.empty(0, device="npu")
    y.set_(x.untyped_storage(), 2, (2, 3), (3, 1))
    same(y, torch.arange(12.0)[2:].as_strided((2, 3), (3, 1)))
    z = torch.arange(4.0, device="npu")
    z.resize_(10)  # grows: the first 4 values stay
    same(z[:4], torch.arange(4.0))


def test_current_device():
    assert torch.npu.current_device() == 0
    with torch.npu.device(1):
        assert torch.npu.current_device() == 1
        assert torch.empty(1, device="npu").device == torch.device("npu:1")
    assert torch.npu.current_device() == 0
    with pytest.raises(RuntimeError, match=r"backplane npu: device index 2 out of range; expected 0 <= index < 2"):
        torch.npu.set_device(2)


def test_device_indices_are_checked_before_they_narrow():
    with pytest.raises(RuntimeError, match="device index 100 out of range; expected 0 <= index < 2"):
        torch.npu.reset_peak_memory_stats(100)
    with pytest.raises(RuntimeError, match="device index 2147483649 out of range"):
        torch.npu.synchronize(2**31 + 1)
    with pytest.raises(RuntimeError, match="device index -3 out of range"):
        torch.npu.memory_stats(-3)


def test_device_count_is_configurable():
    code = ("import torch, backplane; backplane.load('npu'); "
            "print(torch.npu.device_count(), torch.arange(3.0, device='npu:2').sum().item())")
    done = run_python(code, env={"BACKPLANE_NPU_DEVICE_COUNT": "3"}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "3.0"]


@pytest.mark.parametrize("value", ["3x", "100000", "-3", " "])
def test_a_malformed_device_count_is_an_error(value):
    code = "import backplane\nbackplane.load('npu')\n"
    done = run_python(code, env={"BACKPLANE_NPU_DEVICE_COUNT": value}, timeout=120)
    assert done.returncode != 0
    assert f"BACKPLANE_NPU_DEVICE_COUNT='{value}': expected an integer from 0 to 64" in done.stderr, done.stderr[-2000:]


def test_loading_twice_is_harmless():
    first = backplane.load("npu")[0]
    again = backplane.load("npu", "npu")
    assert all(b.path == first.path and b.status == "loaded" for b in again)
    assert torch.ones(2, device="npu").sum().item() == 2.0


def test_cli_lists_npu():
    cli = backplane.lib_dir().parent / "bin" / "backplane"
    if not cli.exists():
        pytest.skip(f"no {cli} beside the libraries (an installed package)")
    done = subprocess.run([str(cli), "list", "--backends", "npu"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = next(l for l in done.stdout.splitlines() if l.split()[:1] == ["npu"])
    assert line.split()[1:3] == ["loaded", "PrivateUse1"], line
