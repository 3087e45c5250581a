"""Which bucket of the selection file in force a call falls in, decided while Inductor
compiles the graph: by the op, the dispatch key of its device, its dtype, and its size (the
element count of its largest Tensor argument, the measure the core's selector takes of an
eager call; selection_file.h).

Static shapes decide once. A symbolic size (dynamic shapes) is compared with each bucket
boundary it must be checked against, in order, as a guard: `size <= up_to` becomes part of
the compiled code's guards, so a call whose size crosses a boundary recompiles (and takes
the other bucket) rather than running code chosen for another size.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import torch

INDUCTOR = "inductor"  # kInductor in selection_file.h


@dataclass(frozen=True)
class InForce:
    rules: tuple  # the file's rules as the core read them: dicts {op, dispatch_key, dtype, buckets}
    # (op, dispatch key) that a preference of the op's own serves: it overrides the file
    # (selection.h), as the core reports it (a preferred plugin that does not offer the op
    # there does not).
    preferred: frozenset

    @property
    def names_inductor(self) -> bool:
        return any(b["plugin"] == INDUCTOR for r in self.rules for b in r["buckets"])

    def rule(self, op: str, dispatch_key: str, dtype: str) -> dict | None:
        """The rule for calls of op on dispatch_key in dtype: the one naming that dtype, else
        the one naming none; None where the op has a preference of its own."""
        if (op, dispatch_key) in self.preferred:
            return None
        found = [r for r in self.rules if r["op"] == op and r["dispatch_key"] == dispatch_key]
        return next((r for r in found if r["dtype"] == dtype), None) or next((r for r in found if not r["dtype"]), None)

    def digest(self) -> str:
        """What the compile cache key must see of the selection: "none" where no bucket names
        `inductor` (the pass then changes no graph, and plugin buckets are chosen at run
        time by the core's selector, not in the code); else a digest of the rules, the
        preferences, the plugins loaded and the references traced (a fixed reference must not
        be served from the cache of the one before it)."""
        if not self.names_inductor:
            return "none"
        import backplane

        loaded = sorted((b.name, b.version, b.path) for b in backplane.backends() if b.status == "loaded")
        named = {r["op"] for r in self.rules if any(b["plugin"] == INDUCTOR for b in r["buckets"])}
        references = sorted((op.name, op.reference) for op in backplane.ops() if op.name in named)
        text = json.dumps([self.rules, sorted(self.preferred), loaded, references], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


def in_force() -> InForce:
    """The file's rules and the preferences that override them, from one call of the core."""
    from .._native import core

    state = core().serving()
    preferred = frozenset((r["op"], r["dispatch_key"]) for r in state["serving"]
                          if r["why"] == f"preferred for {r['op']}")
    return InForce(tuple(state["rules"]), preferred)


def dispatch_key(device: torch.device) -> str:
    """CPU, CUDA or PrivateUse1 (the npu plugin's renamed device), as selection files name keys."""
    if device.type == torch._C._get_privateuse1_backend_name():
        return "PrivateUse1"
    return {"cpu": "CPU", "cuda": "CUDA"}.get(device.type, device.type)


def dtype_name(dtype: torch.dtype) -> str:
    """"float32", "bfloat16": the registry's names (str(torch.float32) is "torch.float32")."""
    return str(dtype).removeprefix("torch.")


def bucket_of(rule: dict, sizes: list, may_guard: bool = True) -> str | None:
    """The plugin (or "inductor") of the first bucket every size fits; `sizes` are the element
    counts of the call's Tensor arguments, ints or SymInts (then each comparison is a guard).
    None where a symbolic size cannot be decided without a guard and may_guard is false, or
    the size is data-dependent (unbacked): the call then stays the plugin's, whose selector
    splits by size at run time."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, statically_known_true

    symbolic = [n for n in sizes if isinstance(n, torch.SymInt)]
    if symbolic and (not may_guard or any(free_unbacked_symbols(n) for n in symbolic)):
        for bucket in rule["buckets"][:-1]:
            if all(statically_known_true(n <= bucket["up_to"]) for n in sizes):
                return bucket["plugin"]
            if not all(statically_known_true(n > bucket["up_to"]) for n in sizes):
                return None  # on both sides of this boundary, for all one can tell
        return rule["buckets"][-1]["plugin"]
    for bucket in rule["buckets"][:-1]:
        if all(bool(n <= bucket["up_to"]) for n in sizes):  # bool() of a SymBool installs the guard
            return bucket["plugin"]
    return rule["buckets"][-1]["plugin"]
