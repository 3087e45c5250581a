"""npu's CPU fallback for aten ops without an npu kernel: it runs them on the CPU with
one warning per op, refuses its blocklist clearly, and never serves other libraries' ops."""
import warnings

import pytest
import torch

from npu_common import QUIET_FALLBACK, same

pytestmark = QUIET_FALLBACK


def test_fallback_runs_on_the_cpu_and_warns_once_per_op():
    x = torch.linspace(-2, 2, 9)
    with pytest.warns(UserWarning, match=r"backplane npu: aten::erfinv(\.out)? has no npu kernel; running it on the CPU"):
        got = torch.erfinv(x.npu() / 3)
    same(got, torch.erfinv(x / 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.erfinv(x.npu() / 3)  # the second call is silent
    # In place and out= fallbacks write the npu tensor itself.
    y = x.npu()
    y.erfinv_()
    out = torch.empty(9, device="npu")
    torch.erfinv(x.npu(), out=out)
    same(y, torch.erfinv(x))
    same(out, torch.erfinv(x))


def test_blocklisted_ops_fail_clearly():
    # mm has npu kernels, its out_dtype overload does not; it may not silently run on the host.
    a = torch.ones(2, 2, device="npu")
    with pytest.raises(NotImplementedError, match=r"backplane npu: aten::mm\.dtype has no npu kernel and is blocked from the CPU fallback"):
        torch.ops.aten.mm.dtype(a, a, torch.float32)
    with pytest.raises(NotImplementedError, match="backplane npu: aten::view_as_real has no npu kernel and returns a view"):
        torch.view_as_real(torch.zeros(2, dtype=torch.complex64, device="npu"))


def test_other_libraries_ops_never_fall_back():
    @torch.library.custom_op("npu_test::twice", mutates_args=(), device_types="cpu")
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    with pytest.raises(NotImplementedError, match=r"backplane npu: npu_test::twice has no npu kernel; the CPU fallback serves aten ops only"):
        twice(torch.ones(2, device="npu"))
