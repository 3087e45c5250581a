"""How a kernel is launched: kernel[grid] when the tensors are real; through
torch.library.wrap_triton while the call is being traced into a graph (torch.compile's
graph pass, python/backplane/compile/graph_pass.py, traces a launcher with fake tensors),
so the graph holds the Triton kernel itself: Inductor generates its launch in the compiled
code and an AOTInductor package embeds the compiled kernel.

Under tracing nothing is measured (tuning.py takes a configuration already chosen, else the
first) and no launch plan is cached (a plan holds eager launchers).

grid_call is the one place kernels are launched, so it is where a call being recorded for
the bridge's launch cache reports each launch (launch_record.py). Plans keep what it
returns, so the recording is looked up at each launch, not when grid_call is called.
"""
import torch

from . import launch_record


def tracing() -> bool:
    """Whether a proxy or fake mode is active: the tensors have no memory to launch on."""
    return (torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY) is not None or
            torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None)


class _GridLaunch:
    """kernel[grid], reporting each launch to the current thread's recording, if any."""

    __slots__ = ("kernel", "grid", "launch")

    def __init__(self, kernel, grid):
        self.kernel, self.grid, self.launch = kernel, grid, kernel[grid]

    def __call__(self, *args, **kwargs):
        recording = launch_record.active()
        if recording is None:
            return self.launch(*args, **kwargs)
        return recording.launch(self.kernel, self.grid, self.launch, args, kwargs)


def grid_call(kernel, grid):
    """kernel[grid], or its traceable wrapper's while tracing."""
    if tracing():
        return torch.library.wrap_triton(kernel)[grid]
    return _GridLaunch(kernel, grid)
