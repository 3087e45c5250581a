"""The passes Inductor runs on every graph it compiles. Each call of a Backplane op whose
selection bucket is `inductor` is replaced by the op's reference (reference.py), traced
with the call's own fake inputs, so Inductor fuses it with its neighbours; each call served
by a plugin of kind triton (by a bucket, or as the plugin the core serves the op with) is
replaced by the Triton kernels its launcher launches (triton_trace.py), so they are
compiled into the graph; every other call is left as it is. The choice is recorded
(resolutions()).

Two stages. The joint stage (torch._inductor.config.joint_custom_pre_pass) runs on the
graph of forward and backward together, before AOTAutograd's partitioner splits it, and
replaces the `inductor` calls only: a forward op and its backward op traced there share
their common terms (rms_norm's and rms_norm_backward's 1/rms of each row), which
splice.share_common_terms merges (the partitioner's own CSE keeps forward and backward
values apart) and the partitioner then saves for the backward instead of recomputing it.
Inference graphs pass through it too. The post-grad stage (post_grad_custom_pre_pass)
runs on each graph after the split and does the rest: the triton plugins' kernels, the
plugin calls left as they are, and any call the joint stage did not see. Each call is
recorded once, by the stage that decided it.

Installed by `import backplane` once torch._inductor.config is imported. A pass the program
set before is chained (it runs after this one); a program that sets its own afterwards
replaces this one, and then `inductor` buckets are not honoured (or, for the joint stage
alone, are honoured after the split, without the shared terms): chain it with
SelectionPass(chained=your_pass) (SelectionPass(chained=..., stage="joint") for the joint one).

Why a graph pass and not a decomposition: Inductor refuses an op that has both a fallback
kernel and a decomposition, so a decomposition could not leave other sizes on the plugin.
Why the uuid: Inductor's and AOTAutograd's caches key on it, so a graph compiled under one
selection is never served from the cache under another.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

from . import log, resolve
from .splice import share_common_terms, splice
from .reference import reference_call

# The code that traces a reference, this package and the formula evaluator, as this process
# loaded it: hashed once.
_CODE = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(Path(__file__).parent.glob("*.py")) +
                                [Path(__file__).parent.parent / "formula.py"])).hexdigest()


STAGES = ("joint", "post_grad")


class SelectionPass(CustomGraphPass):
    def __init__(self, chained=None, stage: str = "post_grad"):
        if stage not in STAGES:
            raise ValueError(f"SelectionPass: stage {stage!r}: expected one of {STAGES}")
        self.stage = stage
        # A pass set before, or several (torch takes a list there too): run after this one.
        self.chained = list(chained) if isinstance(chained, (list, tuple)) else [] if chained is None else [chained]

    def __call__(self, graph: torch.fx.Graph) -> None:
        state = resolve.in_force()
        if state.changes_graphs:
            _resolve_graph(graph, state, inductor_only=self.stage == "joint")
        for other in self.chained:
            other(graph)

    def uuid(self):
        chained = []
        for other in self.chained:
            found = other.uuid() if hasattr(other, "uuid") else None
            if found is None:  # a pass without a uuid: Inductor's cache is bypassed, as it would be
                return None
            chained.append(str(found))
        return f"backplane-selection:{self.stage}:{resolve.in_force().digest()}:{_CODE}:{':'.join(chained)}"


def install(config) -> None:
    """Sets both stages in torch._inductor.config (once each), chaining passes set before."""
    for stage, name in (("joint", "joint_custom_pre_pass"), ("post_grad", "post_grad_custom_pre_pass")):
        current = getattr(config, name)
        if not isinstance(current, SelectionPass):
            setattr(config, name, SelectionPass(chained=current, stage=stage))


def _ops_by_packet() -> dict:
    import backplane

    found = {}
    for op in backplane.ops():
        if op.reference:
            found[backplane.torch_op(op.name)] = op
    return found


def _resolve_graph(graph: torch.fx.Graph, state: resolve.InForce, inductor_only: bool) -> None:
    """Resolves each Backplane call of graph; with inductor_only (the joint stage), only the
    calls whose bucket is `inductor` and whose reference traces, the others left, unrecorded,
    for the post-grad stage."""
    ops = _ops_by_packet()
    chosen, spliced = [], []
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        op = ops.get(node.target.overloadpacket)
        if op is None:
            continue
        tensors = _tensor_values(node)
        if not tensors:
            continue
        key, dtype = resolve.dispatch_key(tensors[0].device), resolve.dtype_name(tensors[0].dtype)
        sizes = [t.numel() for t in tensors]
        rule = state.rule(op.name, key, dtype)
        if rule is not None:
            # An AOTInductor package checks no guard when it runs: a size it cannot decide
            # without one stays the plugin's (whose selector splits by size at run time).
            choice = resolve.bucket_of(rule, sizes, may_guard=not _aot_compiling())
        elif state.serving.get((op.name, key)) in state.triton:
            choice = state.serving[(op.name, key)]  # no split: the plugin the core serves it with
        else:
            continue
        if inductor_only and choice != resolve.INDUCTOR:
            continue
        traced = False
        if choice is None:
            choice = "plugin (a symbolic size on both sides of a bucket boundary)"
        elif choice == resolve.INDUCTOR:
            kept = _replace_by_reference(graph, node, op, spliced)
            if kept and inductor_only:
                continue  # the post-grad stage tries again, and records why it is kept
            choice, traced = (f"plugin ({kept})", False) if kept else (choice, True)
        elif choice in state.triton:
            kept = _replace_by_triton_kernels(graph, node, op, choice)
            choice, traced = (f"{choice} (kept as a call: {kept})", False) if kept else (choice, True)
        chosen.append({"op": op.name, "dispatch_key": key, "dtype": dtype,
                       "size": max(sizes) if all(isinstance(s, int) for s in sizes) else str(sizes),
                       "choice": choice, "traced": traced, "graph": id(graph)})
    if inductor_only:
        share_common_terms(graph, spliced)
    log.record(chosen)
    if chosen:  # tlparse shows it as an artifact of the compile
        import json

        torch._logging.trace_structured(
            "artifact", metadata_fn=lambda: {"name": "backplane_selection", "encoding": "json"},
            payload_fn=lambda: json.dumps(chosen))


def _replace_by_triton_kernels(graph: torch.fx.Graph, node: torch.fx.Node, op, plugin: str) -> str:
    """Replaces node by the Triton kernels `plugin` (kind triton) launches for it; returns ""
    when done, else why the call was kept (it then stays an extern call through the core)."""
    from ..triton_kind import launcher_of, loaded_plugins
    from .triton_trace import trace_launcher

    return trace_launcher(graph, node, launcher_of(loaded_plugins()[plugin], op.name), _bound(node))


def _aot_compiling() -> bool:
    from torch._inductor.virtualized import V

    return bool(getattr(V, "aot_compilation", False))


def _tensor_values(node: torch.fx.Node) -> list:
    """The fake values of the call's Tensor arguments, in order (Tensor lists flattened)."""
    out = []
    flat, _ = torch.utils._pytree.tree_flatten((node.args, node.kwargs))
    for a in flat:
        if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor):
            out.append(a.meta["val"])
    return out


def _bound(node: torch.fx.Node) -> dict:
    """{argument name: value} of the call, defaults filled in, as the schema names them."""
    names = {}
    for i, arg in enumerate(node.target._schema.arguments):
        if i < len(node.args):
            names[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            names[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            names[arg.name] = arg.default_value
    return names


def _replace_by_reference(graph: torch.fx.Graph, node: torch.fx.Node, op, spliced: list) -> str:
    """Replaces node by op's reference traced into graph, adding the nodes put in to
    `spliced`; returns "" when done, else why the call was kept (it then stays the plugin's)."""
    from torch._inductor.pattern_matcher import fwd_only
    from torch._inductor.virtualized import V

    names = _bound(node)
    tensor_names = [n for n, v in names.items() if isinstance(v, torch.fx.Node)]
    constants = {n: v for n, v in names.items() if n not in tensor_names}
    flat, _ = torch.utils._pytree.tree_flatten(list(constants.values()))
    if any(isinstance(v, torch.fx.Node) for v in flat):
        return "a symbolic scalar argument"
    if any(not isinstance(names[n].meta.get("val"), torch.Tensor) for n in tensor_names):
        return "an argument that is not a Tensor"
    out = node.meta.get("val")
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if not all(isinstance(o, torch.Tensor) for o in outs):
        return "an output that is not a Tensor"
    out_dtypes = [o.dtype for o in outs]

    def reference(*tensors):
        result = reference_call(op, {**constants, **dict(zip(tensor_names, tensors))}, out_dtypes)
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        fresh, before = [], []  # the results as returned, and as the reference gave them
        for r, o in zip(results, outs):
            fresh.append(_laid_out_as(_own_memory(r, [*tensors, *fresh, *before]), o))
            before.append(r)
        return fresh if isinstance(result, (list, tuple)) else fresh[0]

    examples = [names[n].meta["val"] for n in tensor_names]
    with V.fake_mode:
        traced = fwd_only(reference, examples)
    spliced += splice(graph, node, traced, [names[n] for n in tensor_names])
    return ""


def _own_memory(value: torch.Tensor, others: list) -> torch.Tensor:
    """value, copied where it shares memory with one of `others` (the call's arguments, the
    results before it). The op's schema declares no alias: eager, each result is a tensor of
    its own; a reference that is a view (crop's narrow), spliced as it is, would return the
    argument's memory from the compiled call, and a write into the result would change the
    argument."""
    if any(torch._C._is_alias_of(value, other) for other in others):
        return torch.ops.aten.clone(value, memory_format=torch.contiguous_format)
    return value


def _laid_out_as(value: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """value in the stride order of `out`, the op's output as the graph was traced with it.
    The graph's views of the output were traced with those strides; Inductor lays a fused
    computation out contiguously unless told, and then copies where such a view needs
    another order (rotary's output following a transposed x: a copy kernel per call)."""
    if not _dense_permuted(out):
        return value
    return torch.ops.prims.inductor_force_stride_order(value, out.stride())


def _dense_permuted(t: torch.Tensor) -> bool:
    """Whether t's elements fill its memory in an order other than row-major: a permuted
    dense layout (transposed, channels-last). False for symbolic sizes or strides (no
    guard is added for a layout)."""
    if any(isinstance(v, torch.SymInt) for v in (*t.shape, *t.stride())):
        return False
    dims = sorted((d for d in range(t.dim()) if t.shape[d] != 1), key=lambda d: t.stride(d))
    expected = 1
    for d in dims:
        if t.stride(d) != expected:
            return False
        expected *= t.shape[d]
    return dims != sorted(dims, reverse=True)
