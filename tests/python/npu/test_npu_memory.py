"""npu memory: device addresses the host cannot read, fresh memory that shows reads of
what nobody wrote, allocation errors, statistics, and pinned memory and generators from
the device hooks."""
import resource

import pytest
import torch

from conftest import run_python
from npu_common import QUIET_FALLBACK, same

pytestmark = QUIET_FALLBACK


def test_host_code_cannot_read_device_memory():
    # The device's addresses are not host addresses: reading one from the host (a CPU
    # kernel handed an npu pointer by mistake) kills the process instead of working.
    code = ("import ctypes, torch, backplane; backplane.load('npu'); "
            "x = torch.zeros(4, device='npu'); torch.npu.synchronize(); ctypes.string_at(x.data_ptr(), 4)")
    done = run_python(code, timeout=120,
                      preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))  # no core file
    if "AddressSanitizer" in done.stderr:  # an ASan build (scripts/sanitizers.sh asan) reports the SEGV itself
        assert done.returncode != 0 and "SEGV" in done.stderr, (done.returncode, done.stderr)
    else:
        assert done.returncode < 0, (done.returncode, done.stderr)  # killed by a signal (SIGSEGV)


def test_fresh_memory_is_not_zero():
    # Fresh device memory is filled with 0xFF: an op that reads what nobody wrote shows NaN.
    # Only a new segment is fresh: the caching allocator hands out reused blocks as they are
    # (as CUDA's does); 64 MiB is larger than any cached block, so it takes a new one.
    assert torch.empty(16 << 20, device="npu").isnan().all()


def test_allocation_and_argument_errors_are_named():
    with pytest.raises(torch.OutOfMemoryError, match=r"backplane npu: allocating 1125899906842624 bytes on npu:0 failed: out of memory"):
        torch.empty(2**48, dtype=torch.float32, device="npu")
    with pytest.raises(RuntimeError, match="backplane npu: pin_memory applies to CPU tensors, not npu ones"):
        torch.empty(2, device="npu", pin_memory=True)
    with pytest.raises(ValueError, match="expected an npu device, got cpu"):
        torch.npu.synchronize("cpu")


def test_memory_stats():
    torch.npu.synchronize(1)
    torch.npu.reset_peak_memory_stats(1)
    before = torch.npu.memory_allocated(1)
    assert torch.npu.max_memory_allocated(1) == before
    t = torch.empty(1024, device="npu:1")
    assert torch.npu.memory_allocated(1) == before + 4096
    assert torch.npu.memory_stats(1)["allocation.all.current"] >= 1
    del t
    assert torch.npu.memory_allocated(1) == before
    assert torch.npu.max_memory_allocated(1) == before + 4096
    with pytest.raises(RuntimeError, match="expected 0 <= index < 2"):
        torch.npu.memory_stats(5)


def test_generators_and_pinned_memory_come_from_the_hooks():
    assert torch.Generator(device="npu:1").device == torch.device("npu:1")
    # Random ops run through the CPU fallback on the CPU generator (a stub limit).
    torch.npu.manual_seed(7)
    on_npu = torch.randn(5, device="npu")
    torch.manual_seed(7)
    same(on_npu, torch.randn(5))
    assert torch.ones(3).pin_memory().is_pinned()
    assert not torch.ones(3).is_pinned()
