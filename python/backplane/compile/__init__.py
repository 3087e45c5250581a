"""Selection at compile time: under torch.compile (and in AOTInductor packages) a selection
file's `inductor` buckets replace a Backplane op's call by Inductor's own code for the op's
registry `reference:`, traced into the graph so that it fuses with its neighbours; every
other call stays the plugin's extern kernel, chosen by size at run time as in eager mode.

    backplane.apply_selection("sel.yaml")    # rms_norm on CUDA, bfloat16: {up_to: 65536, inductor}, {cuda}
    torch.compile(model)(x)                  # small rms_norm calls fused by Inductor, large ones on cuda
    backplane.compile.resolutions()          # what each compiled call chose

With no selection file, or one naming no `inductor` bucket, compiled graphs call the plugins
exactly as without this module. How it works and its limits: docs/selection.md.

- graph_pass.py: the pass Inductor runs after AOTAutograd (post_grad_custom_pre_pass),
  whose uuid() is the selection in force: changing it changes Inductor's cache key.
- resolve.py: which bucket a call's dtype and size fall in; guards on the bucket
  boundaries where a size is symbolic (dynamic shapes).
- reference.py: the op's reference as a function over its arguments, in its opmath dtype.
- log.py: resolutions(), what the compiles of this process chose, per op call;
  graphs_from_cache(), how many graphs came from Inductor's cache instead (not in it).

Installed when torch._inductor.config is imported (importing Inductor at `import backplane`
would cost every program that never compiles).
"""
from __future__ import annotations

from ..import_hooks import when_imported
from .log import graphs_from_cache, resolutions

__all__ = ["graphs_from_cache", "resolutions"]


def _install(config) -> None:
    from .graph_pass import install

    install(config)


when_imported("torch._inductor.config", _install)
