"""torch.compile(mode="reduce-overhead") on the device: Inductor's CUDA graph trees serve
CUDA only, and for any other device they step aside with a log line that is off by
default, so the mode would run silently without graphs. This warns once per process
instead, naming what to use (torch.npu.graph around the compiled step).

Hooked where Inductor prepares every compiled graph for its calls, cache hit or not
(output_code.CompiledFxGraph.post_compile, torch 2.11 to 2.14), while the mode's setting
(config.triton.cudagraphs) is in force. A torch without that method is told
about once, at import: there the mode would run without graphs unannounced.
"""
from __future__ import annotations

import warnings

from ._device_type import DEVICE

MESSAGE = (f"backplane {DEVICE}: torch.compile(mode=\"reduce-overhead\") runs without device graphs on {DEVICE}: "
           f"Inductor's CUDA graph trees serve CUDA only, so each call launches its kernels one by one. To replay a "
           f"compiled step as one submission, capture it with torch.{DEVICE}.graph (torch.{DEVICE}.NPUGraph). "
           f"Shown once.")
_warned = False


def on_load(lib) -> None:
    from backplane.import_hooks import when_imported

    when_imported("torch._inductor.output_code", _hook)


def _hook(output_code) -> None:
    graph_class = getattr(output_code, "CompiledFxGraph", None)
    original = getattr(graph_class, "post_compile", None)
    if original is None:
        warnings.warn(f"backplane {DEVICE}: this torch has no output_code.CompiledFxGraph.post_compile; "
                      f"torch.compile(mode=\"reduce-overhead\") on {DEVICE} would run without device graphs, unannounced")
        return

    def post_compile(self, *args, **kwargs):  # any signature: only the graph's devices are read
        global _warned
        from torch._inductor import config  # the mode's settings are patched in while this runs

        asked = config.triton.cudagraphs  # graph_kwargs["cudagraphs"] is already off here for devices not CUDA
        if not _warned and asked and DEVICE in getattr(self, "device_types", ()):
            _warned = True
            warnings.warn(MESSAGE, stacklevel=2)
        return original(self, *args, **kwargs)

    graph_class.post_compile = post_compile
