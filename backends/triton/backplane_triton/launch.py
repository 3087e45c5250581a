"""How a kernel is launched: kernel[grid] when the tensors are real; through
torch.library.wrap_triton while the call is being traced into a graph (torch.compile's
graph pass, python/backplane/compile/graph_pass.py, traces a launcher with fake tensors),
so the graph holds the Triton kernel itself: Inductor generates its launch in the compiled
code and an AOTInductor package embeds the compiled kernel.

Under tracing nothing is measured (tuning.py takes a configuration already chosen, else the
first) and no launch plan is cached (a plan holds eager launchers).
"""
import torch


def tracing() -> bool:
    """Whether a proxy or fake mode is active: the tensors have no memory to launch on."""
    return (torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY) is not None or
            torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None)


def grid_call(kernel, grid):
    """kernel[grid], or its traceable wrapper's while tracing."""
    if tracing():
        return torch.library.wrap_triton(kernel)[grid]
    return kernel[grid]
