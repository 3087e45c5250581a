"""Bad input raises the same Python exception, with the same message, eagerly on the CPU
and under FakeTensorMode (what torch.compile and torch.export see)."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

ops = torch.ops.backplane

def _interleaved_sin_out(t):
    return ops.sin_out(t[0:12:2], out=t[2:14:2])


CASES = [
    (lambda: ops.add(torch.ones(3), torch.ones(3, dtype=torch.int64)), TypeError,
     "backplane::add: argument 'b' has dtype int64, expected one of: float32, float64, float16, bfloat16"),
    (lambda: ops.add(torch.ones(3), torch.ones(3, dtype=torch.float64)), TypeError,
     "backplane::add: arguments 'a' and 'b' must share one dtype, found float32 and float64"),
    (lambda: ops.add(torch.ones(2, 3), torch.ones(4)), ValueError,
     "backplane::add: sizes of 'a' [2, 3] and 'b' [4] do not broadcast (dimension -1: 3 vs 4)"),
    (lambda: ops.crop(torch.ones(3, 8, 8), [4, 0, 5, 8]), ValueError,
     "backplane::crop: box [4, 0, 5, 8] does not fit img of sizes [3, 8, 8]"),
    # top + height and left + width past 2^63 - 1 once wrapped and read out of bounds.
    (lambda: ops.crop(torch.ones(3, 8, 8), [2**63 - 2, 0, 3, 8]), ValueError,
     "backplane::crop: box [9223372036854775806, 0, 3, 8] does not fit img of sizes [3, 8, 8] "
     "(top + height or left + width overflows int64)"),
    (lambda: ops.crop(torch.ones(3, 8, 8), [0, 2**63 - 1, 8, 1]), ValueError,
     "backplane::crop: box [0, 9223372036854775807, 8, 1] does not fit img of sizes [3, 8, 8] "
     "(top + height or left + width overflows int64)"),
    (lambda: ops.rms_norm(torch.ones(2, 8), torch.ones(7)), ValueError,
     "backplane::rms_norm: weight must have sizes [8] (x's last dimension), found [7]"),
    (lambda: ops.sin_out(torch.ones(5, 6), out=torch.empty(0)), ValueError,
     "backplane::sin_out: argument 'out' has sizes [0], expected [5, 6] (the sizes of 'x')"),
    # Interleaved views of one buffer: overlap too hard for PyTorch to classify, which
    # once passed and gave wrong numbers.
    (lambda: _interleaved_sin_out(torch.randn(14)), ValueError,
     "backplane::sin_out: argument 'out' shares elements with input 'x' (sizes [6], strides [2], offset 2 and "
     "sizes [6], strides [2], offset 0 in one storage)"),
    # Two indices reaching one element without a zero stride: once compounded silently.
    (lambda: ops.scale_(torch.arange(10.0).as_strided((4, 3), (1, 1)), 2.0), ValueError,
     "backplane::scale_: argument 'x' is written but two of its indices reach the same element (sizes [4, 3], "
     "strides [1, 1])"),
    (lambda: ops.sin_out(torch.ones(2, 3), out=torch.empty(8).as_strided((2, 3), (2, 1))), ValueError,
     "backplane::sin_out: argument 'out' is written but two of its indices reach the same element (sizes [2, 3], "
     "strides [2, 1])"),
    (lambda: ops.add(torch.ones(3), torch.ones(3), alpha=True), TypeError,
     "backplane::add: argument 'alpha' is a bool (True); expected a real number for tensors of dtype float32"),
    (lambda: ops.scale_(torch.ones(1, 4).expand(3, 4), 2.0), ValueError,
     "backplane::scale_: argument 'x' is written but two of its indices reach the same element"),
]


@pytest.mark.parametrize("call,exc,message", CASES)
def test_eager_error(call, exc, message):
    with pytest.raises(exc) as err:
        call()
    assert message in str(err.value)


@pytest.mark.parametrize("call,exc,message", CASES)
def test_fake_tensor_error_matches(call, exc, message):
    with FakeTensorMode():
        with pytest.raises(exc) as err:
            call()
    assert message in str(err.value)


def test_no_silent_cross_device_computation():
    # A meta tensor mixed with a CPU one: refused, not computed somewhere.
    with pytest.raises(RuntimeError, match="must be on one device"):
        ops.add(torch.ones(3, device="meta"), torch.ones(3))


def test_inference_tensors_are_written_only_in_inference_mode():
    with torch.inference_mode():
        t = torch.ones(3)
    with pytest.raises(RuntimeError, match="backplane::scale_: argument 'x' is an inference tensor, written outside "
                                           "torch.inference_mode()"):
        ops.scale_(t, 2.0)
    with torch.inference_mode():
        ops.scale_(t, 2.0)
    assert t.tolist() == [2.0, 2.0, 2.0]


def test_disjoint_interleaved_views_are_computed():
    # t[0::2] and t[1::2] share no element: computed, not refused as "may overlap".
    t = torch.randn(12)
    expected = torch.sin(t[0::2])
    ops.sin_out(t[0::2], out=t[1::2])
    torch.testing.assert_close(t[1::2], expected)
    # A transposed view of a square buffer shares elements in another order: refused.
    square = torch.randn(4, 4)
    with pytest.raises(ValueError, match="argument 'out' shares elements with input 'x'"):
        ops.sin_out(square, out=square.t())


def test_sin_out_accepts_views_that_cannot_interleave():
    t = torch.randn(20)
    other = torch.empty(5)
    ops.sin_out(t[0:10:2], out=other)  # a strided input, a separate out
    torch.testing.assert_close(other, torch.sin(t[0:10:2]))
    expected = torch.sin(t[11:20:2])
    ops.sin_out(t[11:20:2], out=t[0:10:2])  # one buffer, disjoint byte ranges
    torch.testing.assert_close(t[0:10:2], expected)
    view = t[1:10:2]
    expected = torch.sin(view)
    ops.sin_out(view, out=t[1:10:2])  # the same elements: in place
    torch.testing.assert_close(view, expected)
