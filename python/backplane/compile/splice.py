"""Putting a traced graph in the place of one call node: what both replacements of the
compile-time pass do (graph_pass.py: the reference; triton_trace.py: a triton plugin's
kernels); and merging the terms that spliced graphs compute alike (share_common_terms)."""
from __future__ import annotations

import torch


def splice(graph: torch.fx.Graph, node: torch.fx.Node, traced: torch.fx.GraphModule, inputs: list) -> list:
    """Puts traced's graph in node's place, its placeholders bound to `inputs`; node's users
    (getitem(node, i) for several outputs) take its outputs. Returns the nodes it put in."""
    placeholders = [p for p in traced.graph.nodes if p.op == "placeholder"]
    copied = dict(zip(placeholders, inputs))
    with graph.inserting_before(node):
        value = graph.graph_copy(traced.graph, copied)
    if isinstance(node.meta.get("val"), (list, tuple)):
        for user in list(node.users):
            user.replace_all_uses_with(value[user.args[1]])
            graph.erase_node(user)
    else:
        node.replace_all_uses_with(value)
    graph.erase_node(node)
    return [copied[n] for n in traced.graph.nodes if n.op not in ("placeholder", "output") and n in copied]


def share_common_terms(graph: torch.fx.Graph, spliced: list) -> int:
    """Merges each spliced node into an earlier spliced node that computes the same thing
    (the same aten op of the same arguments): a forward op's reference and its backward
    op's, spliced into one joint graph, then compute 1/rms of each row once, and
    AOTAutograd's partitioner saves it for the backward (its own CSE keeps forward and
    backward values apart). Only functional ops without randomness merge; nodes the
    program wrote itself are never touched, and a graph's outputs and copies (aten.clone,
    which graph_pass._own_memory puts in so a result has memory of its own) are never
    merged into a twin: merged, two calls' results would be one tensor, and a write into
    one would change the other. Returns how many nodes were merged."""
    mine = set(spliced)
    seen: dict = {}
    merged = 0
    for node in list(graph.nodes):  # in graph order: an earlier twin is always seen first
        if node not in mine or node.op != "call_function" or not _mergeable(node.target):
            continue
        key = (node.target, _hashable(node.args), _hashable(node.kwargs))
        twin = seen.get(key)
        if twin is None:
            seen[key] = node
            continue
        if _kept_apart(node):  # it stays, though later twins may still be merged into it or the first
            continue
        node.replace_all_uses_with(twin)
        graph.erase_node(node)
        merged += 1
    return merged


def _kept_apart(node: torch.fx.Node) -> bool:
    """A copy, or a value the graph returns: each call's own, never merged into a twin (a
    later twin may be merged into it: its users only read the value)."""
    return node.target is torch.ops.aten.clone.default or any(user.op == "output" for user in node.users)


def _mergeable(target) -> bool:
    if not isinstance(target, torch._ops.OpOverload):
        return False
    schema = target._schema
    return (not schema.is_mutable and torch.Tag.nondeterministic_seeded not in target.tags
            and not any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments))


def _hashable(value):
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_hashable(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _hashable(v)) for k, v in value.items())))
    if isinstance(value, float):
        return ("float", value.hex() if value == value else "nan")  # 0.0 and -0.0 apart; nan equal to nan
    if isinstance(value, (torch.fx.Node, int, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                          torch.memory_format)):
        return (type(value).__name__, value)
    return ("object", id(value))  # anything else: equal only to itself
