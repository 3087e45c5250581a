"""rms_norm's accumulation, on the CPU and (where there is one) a CUDA GPU: a long float32
row with an outlier agrees with PyTorch's F.rms_norm to float32's default tolerance, and a
bfloat16 row of more than 2^31 elements (expanded, so it costs no memory of its own)
normalizes to the weight. The npu device runs the first case in test_npu_ops.py."""
import pytest
import torch

import backplane

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _ready(device):
    if device == "cuda":
        backplane.load("cuda")


@pytest.mark.parametrize("device", DEVICES)
def test_long_row_with_an_outlier_matches_pytorch(device):
    _ready(device)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 65536, generator=generator)
    x[:, 12345] = 3.0e3  # one outlier a row: a float accumulator then drops the small terms
    w = torch.randn(65536, generator=generator)
    x, w = x.to(device), w.to(device)
    got = torch.ops.backplane.rms_norm(x, w, 1e-6)
    exact = torch.nn.functional.rms_norm(x.double(), [65536], w.double(), 1e-6)
    # Within float32's tolerance of the exact result, and no less accurate than PyTorch's
    # own kernel on the same device.
    torch.testing.assert_close(got, exact.float())
    ours = ((got.double() - exact).abs().max() / exact.abs().max()).item()
    theirs = ((torch.nn.functional.rms_norm(x, [65536], w, 1e-6).double() - exact).abs().max() / exact.abs().max()).item()
    assert ours <= max(2 * theirs, 1e-7), (ours, theirs)
    if device == "cpu":  # the red team's comparison: PyTorch's CPU result
        torch.testing.assert_close(got, torch.nn.functional.rms_norm(x, [65536], w, 1e-6))


def _free_memory_bytes():
    with open("/proc/meminfo") as info:
        fields = dict(line.split(":", 1) for line in info)
    return int(fields["MemAvailable"].split()[0]) * 1024


@pytest.mark.parametrize("device", DEVICES)
def test_a_row_of_more_than_2_to_the_31_elements(device):
    _ready(device)
    n = 2**31 + 17
    needed = 2 * n  # the output; the expanded inputs cost nothing

    if device == "cpu" and _free_memory_bytes() < needed + (4 << 30):
        pytest.skip(f"needs {(needed + (4 << 30)) >> 30} GiB of free memory for a 2^31-element row")
    if device == "cuda" and torch.cuda.mem_get_info()[0] < needed + (1 << 30):
        pytest.skip("needs 5 GiB of free GPU memory for a 2^31-element row")
    x = torch.full((1,), 2.0, dtype=torch.bfloat16, device=device).expand(n)
    w = torch.full((1,), 3.0, dtype=torch.bfloat16, device=device).expand(n)
    y = torch.ops.backplane.rms_norm(x, w, 1e-6)
    # x / rms(x) = 1 everywhere: y is the weight. The ends catch 32-bit index wrap-around.
    assert y[0].item() == 3.0 and y[-1].item() == 3.0 and y[2**31 - 1].item() == 3.0
    assert y[::4096].eq(3.0).all()
