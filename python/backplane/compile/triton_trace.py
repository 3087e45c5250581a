"""A call served by a plugin of kind triton, traced into the graph: the launcher runs on the
call's fake tensors with outputs allocated as the core's contract would (the sizes and
strides of the call's own fake outputs), and each Triton kernel it launches becomes a
torch.library.wrap_triton node (backplane_triton/launch.py), so Inductor generates the
kernel's launch into the compiled code and an AOTInductor package embeds the compiled
kernel; the package then needs neither the plugin nor Python to run.

Limits: not under Triton's interpreter (TRITON_INTERPRET=1: torch.library.wrap_triton then
gives the plain kernel, which cannot run on fake tensors; the call stays an extern call
through the core, which is how CPU-only CI compiles such calls); static sizes only (a launcher's host code picks block sizes from the sizes; under
dynamic shapes the call stays an extern call through the core); ops that write an argument
stay the plugin's call; the launcher must launch through wrap_triton while tracing (the
in-tree plugin and the `new-backend --triton` scaffold do).
"""
from __future__ import annotations

import torch

from .splice import splice


def trace_launcher(graph: torch.fx.Graph, node: torch.fx.Node, launcher, bound: dict) -> str:
    """Replaces node by launcher's kernels traced into graph; returns "" when done, else why
    the call was kept. bound: {argument name: value} in schema order (graph_pass._bound)."""
    from torch._inductor.virtualized import V
    from torch.func import functionalize
    from torch.fx.experimental.proxy_tensor import make_fx

    import os

    if os.environ.get("TRITON_INTERPRET") == "1":
        return "Triton's interpreter (TRITON_INTERPRET=1) traces no kernel into a graph"
    schema = node.target._schema
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return "an op that writes an argument"
    tensor_names = [n for n, v in bound.items() if isinstance(v, torch.fx.Node)]
    constants = {n: v for n, v in bound.items() if n not in tensor_names}
    flat, _ = torch.utils._pytree.tree_flatten(list(constants.values()))
    if any(isinstance(v, torch.fx.Node) for v in flat):
        return "a symbolic scalar argument"
    examples = [bound[n].meta.get("val") for n in tensor_names]
    if not all(isinstance(e, torch.Tensor) for e in examples):
        return "an argument that is not a Tensor"
    out = node.meta.get("val")
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if not all(isinstance(o, torch.Tensor) for o in outs):
        return "an output that is not a Tensor"
    sizes = [s for t in (*examples, *outs) for s in (*t.shape, *t.stride())]
    if any(isinstance(s, torch.SymInt) for s in sizes):
        return "symbolic sizes (the launcher's host code picks blocks from them)"
    layouts = [(tuple(o.shape), tuple(o.stride()), o.dtype, o.device) for o in outs]
    order = list(bound)

    def body(*tensors):
        values = {**constants, **dict(zip(tensor_names, tensors))}
        written = [torch.empty_strided(shape, stride, dtype=dtype, device=device)
                   for shape, stride, dtype, device in layouts]
        launcher(*written, *(values[n] for n in order))
        return tuple(written) if isinstance(out, (list, tuple)) else written[0]

    # Functionalized, so each kernel's writes into the fresh outputs become the outputs of a
    # triton_kernel_wrapper_functional node the result depends on: traced as mutations of
    # buffers nothing reads, dead-code elimination dropped the launches and left the
    # outputs unwritten (seen on an H200). Views stay views (remove="mutations"): their
    # *_copy forms, which removing views too leaves, fail in torch 2.11's lowering ("both a
    # fallback and a decomp for same op: aten.expand_copy.default", seen on an H200).
    with V.fake_mode:
        traced = make_fx(functionalize(body, remove="mutations"), tracing_mode="real")(*examples)
    if not _outputs_come_from_kernels(traced):
        return "the trace holds no Triton kernel its result comes from"
    splice(graph, node, traced, [bound[n] for n in tensor_names])
    return ""


def _outputs_come_from_kernels(traced: torch.fx.GraphModule) -> bool:
    """Whether every output of the trace is computed by a Triton kernel node (not a bare
    allocation): the guard against a call whose launches were not captured."""
    (output,) = [n for n in traced.graph.nodes if n.op == "output"]
    results = torch.utils._pytree.tree_leaves(output.args)

    def from_kernel(node, seen) -> bool:
        if not isinstance(node, torch.fx.Node) or node in seen:
            return False
        seen.add(node)
        if "triton_kernel_wrapper" in str(node.target):
            return True
        return any(from_kernel(a, seen) for a in node.all_input_nodes)

    return bool(results) and all(from_kernel(r, set()) for r in results)
