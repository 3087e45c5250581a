"""Putting a traced graph in the place of one call node: what both replacements of the
compile-time pass do (graph_pass.py: the reference; triton_trace.py: a triton plugin's
kernels)."""
from __future__ import annotations

import torch


def splice(graph: torch.fx.Graph, node: torch.fx.Node, traced: torch.fx.GraphModule, inputs: list) -> None:
    """Puts traced's graph in node's place, its placeholders bound to `inputs`; node's users
    (getitem(node, i) for several outputs) take its outputs."""
    placeholders = [p for p in traced.graph.nodes if p.op == "placeholder"]
    with graph.inserting_before(node):
        value = graph.graph_copy(traced.graph, dict(zip(placeholders, inputs)))
    if isinstance(node.meta.get("val"), (list, tuple)):
        for user in list(node.users):
            user.replace_all_uses_with(value[user.args[1]])
            graph.erase_node(user)
    else:
        node.replace_all_uses_with(value)
    graph.erase_node(node)
