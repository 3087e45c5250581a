"""Ops on npu: every registry op against the CPU backend (and opcheck), 16-bit rounding,
device mixing and overlap refused, aten's matrix products on the device, and
torch.compile."""
import warnings

import pytest
import torch

from npu_common import QUIET_FALLBACK, same
from samples import DTYPES, block, require_kernel, results, samples

pytestmark = QUIET_FALLBACK


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op_name", list(samples()))
@pytest.mark.parametrize("device", ["npu:0", "npu:1"])
def test_every_op_matches_the_cpu_backend(op_name, dtype, device):
    require_kernel(op_name, "npu", "cpu")
    op = getattr(torch.ops.backplane, op_name)
    for (args, kwargs), (cargs, ckwargs) in zip(samples(dtype, device)[op_name], samples(dtype, "cpu")[op_name]):
        got = results(op, op(*args, **kwargs), args, kwargs)  # in place or out=: what was written
        expected = results(op, op(*cargs, **ckwargs), cargs, ckwargs)
        for g, e in zip(got, expected, strict=True):
            assert g.device == torch.device(device)
            torch.testing.assert_close(g.cpu(), e)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_16bit_add_and_mul_round_once_from_float(dtype):
    # npu's add (alpha 1) and mul hand 16-bit inputs to aten's CPU op, which must give
    # float(a) op float(b) rounded to the 16-bit type, as the float path does, on its
    # vectorized body and its scalar tail alike: 65536 + 7 elements of wide exponents.
    g = torch.Generator().manual_seed(3)
    span = 14 if dtype == torch.float16 else 60
    a, b = ((torch.randn(65543, generator=g) * torch.exp2(torch.randint(-span, span, (65543,), generator=g).float()))
            .to(dtype) for _ in range(2))
    for alpha in (1, 1.0):
        same(torch.ops.backplane.add(a.npu(), b.npu(), alpha=alpha), (a.float() + b.float()).to(dtype))
    same(torch.ops.backplane.mul(a.npu(), b.npu()), (a.float() * b.float()).to(dtype))
    # Any other alpha: aten's 16-bit op rounds alpha to the 16-bit type, so npu computes
    # in float; on this data the two differ.
    in_float = torch.add(a.float(), b.float(), alpha=2.3).to(dtype)
    alpha_rounded = torch.add(a.float(), b.float(), alpha=torch.tensor(2.3).to(dtype).item()).to(dtype)
    assert not torch.equal(alpha_rounded, in_float), "the data no longer tells the two apart"
    same(torch.ops.backplane.add(a.npu(), b.npu(), alpha=2.3), in_float)


@pytest.mark.parametrize("op_name", list(samples()))
def test_opcheck_npu(op_name):
    require_kernel(op_name, "npu")
    op = getattr(torch.ops.backplane, op_name).default
    for args, kwargs in samples(torch.float32, "npu")[op_name]:
        torch.library.opcheck(op, args, kwargs)


def test_mixing_npu_and_cpu_is_refused():
    with pytest.raises(RuntimeError, match="backplane::add: arguments 'a' and 'b' must be on one device, found npu:0 and cpu"):
        torch.ops.backplane.add(torch.ones(3, device="npu"), torch.ones(3))
    with pytest.raises(RuntimeError, match="backplane::add: arguments 'a' and 'b' must be on one device, found npu:0 and npu:1"):
        torch.ops.backplane.add(torch.ones(3, device="npu:0"), torch.ones(3, device="npu:1"))
    # aten ops: structured ones are refused by PyTorch's own checks; the fallback
    # refuses the rest rather than compute on copies of both on the host.
    a, c = torch.ones(3, device="npu"), torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two devices, npu:0 and cpu"):
        torch.atan2(a, c)
    with pytest.raises(RuntimeError, match=r"backplane npu: aten::where.self got tensors on npu:0 and cpu; expected them all on one npu device \(0-dim CPU tensors excepted\)"):
        torch.where(a > 0, a, c)
    with pytest.raises(RuntimeError, match=r"backplane npu: aten::dot got tensors on npu:0 and npu:1"):
        torch.dot(a, a.to("npu:1"))
    same(torch.where(a > 0, a, torch.tensor(2.0)), torch.ones(3))  # a CPU scalar is fine


def test_out_overlap_is_refused_on_npu():
    t = torch.randn(14, device="npu")
    with pytest.raises(ValueError, match="backplane::sin_out: argument 'out' shares elements with input 'x'"):
        torch.ops.backplane.sin_out(t[0:12:2], out=t[2:14:2])


def test_matrix_products_run_on_the_device():
    # The hot path of a model (npu's own kernels, never the CPU fallback).
    g = torch.Generator().manual_seed(0)
    a, b, bias = torch.randn(5, 7, generator=g), torch.randn(7, 3, generator=g), torch.randn(3, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback would warn
        got = torch.nn.functional.linear(a.npu(), b.t().npu(), bias.npu())
        batched = torch.randn(2, 5, 7, generator=g)
        got_b = torch.bmm(batched.npu(), batched.transpose(1, 2).npu())
        # The out= forms, which Inductor's generated code calls.
        out = torch.empty(5, 3, device="npu")
        torch.addmm(bias.npu(), a.npu(), b.npu(), out=out)
        out_mm = torch.mm(a.npu(), b.npu(), out=torch.empty(0, device="npu"))  # resized, as aten's
    assert got.device.type == "npu"
    torch.testing.assert_close(got.cpu(), torch.nn.functional.linear(a, b.t(), bias))
    torch.testing.assert_close(out.cpu(), torch.addmm(bias, a, b))
    torch.testing.assert_close(out_mm.cpu(), a @ b)
    with pytest.raises(RuntimeError, match=r"aten::mm\.out: out has dtype Double, expected Float"):
        torch.mm(a.npu(), b.npu(), out=torch.empty(5, 3, dtype=torch.float64, device="npu"))
    torch.testing.assert_close(got_b.cpu(), torch.bmm(batched, batched.transpose(1, 2)))
    # PyTorch's own size check (its meta function), raised at the call.
    with pytest.raises(RuntimeError, match=r"must have same reduction dim|cannot be multiplied"):
        torch.mm(a.npu(), a.npu())


def test_rms_norm_long_row_with_an_outlier():
    x = torch.randn(2, 65536, generator=torch.Generator().manual_seed(0))
    x[:, 999] = 3.0e3
    w = torch.randn(65536, generator=torch.Generator().manual_seed(1))
    got = torch.ops.backplane.rms_norm(x.npu(), w.npu(), 1e-6).cpu()
    torch.testing.assert_close(got, torch.nn.functional.rms_norm(x, [65536], w, 1e-6))


def cropped_block(x, y, w):
    return torch.ops.backplane.crop(block(x, y, w), [0, 1, 2, 3])


def test_compile_aot_eager_matches_eager():
    g = torch.Generator().manual_seed(0)
    x, y, w = (torch.randn(*s, generator=g).npu() for s in [(4, 16), (16,), (16,)])
    expected = cropped_block(x, y, w)
    got = torch.compile(cropped_block, backend="aot_eager", fullgraph=True)(x, y, w)
    assert got.device.type == "npu"
    torch.testing.assert_close(got.cpu(), expected.cpu())
