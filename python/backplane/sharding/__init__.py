"""DTensor sharding rules for every registry op and every loaded plugin's own ops,
generated from their registry entries (docs/distributed.md):

    import backplane, torch
    from torch.distributed.tensor import distribute_tensor, Shard, Replicate
    x = distribute_tensor(torch.randn(8, 64), mesh, [Shard(0)])   # sequence-parallel rows
    w = distribute_tensor(torch.ones(64), mesh, [Replicate()])
    torch.ops.backplane.rms_norm(x, w)                              # Shard(0), no collective

    backplane.sharding.rules()          # {"backplane::rms_norm": Rule(...), ...}
    print(backplane.sharding.describe())

`import backplane` registers them (and `backplane.load` a plugin's own ops) with DTensor
when torch.distributed is available: at once if DTensor is imported, else as soon as it
is (backplane.import_hooks), so a program that never uses DTensor does not pay for
importing it. BACKPLANE_SHARDING=0 turns them off.
"""
from __future__ import annotations

import os

from ..import_hooks import when_imported
from .rules import Rule, rule_for
from .strategies import ShardingRefused

__all__ = ["Rule", "ShardingRefused", "describe", "install", "rules", "status"]

_rules: dict[str, Rule] = {}
_status = "not installed yet"


def install(rows) -> None:
    """Registers the rule of each op in `rows` (core().ops() rows) with DTensor, once."""
    global _status
    if os.environ.get("BACKPLANE_SHARDING", "1") == "0":
        _status = "off: BACKPLANE_SHARDING=0"
        return
    import torch

    if not torch.distributed.is_available():
        _status = "off: this torch has no torch.distributed"
        return
    new = [rule for rule in map(rule_for, rows) if rule.op not in _rules]
    for rule in new:
        _rules[rule.op] = rule
    _status = "on"
    when_imported("torch.distributed.tensor", lambda _: _register(new))


def _register(new: list[Rule]) -> None:
    import torch

    from . import dtensor

    for rule in new:
        namespace, op = rule.op.split("::")
        dtensor.register(rule, getattr(getattr(torch.ops, namespace), op).default)


def rules() -> dict[str, Rule]:
    """The registered rules, by qualified op name ("backplane::add")."""
    return dict(_rules)


def describe() -> str:
    """One line per registered op: its rule, where it comes from, what may be Partial."""
    return "\n".join(rule.describe() for rule in _rules.values())


def status() -> str:
    """"on", or "off: <why>"."""
    return _status
