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
from dataclasses import dataclass, field

import torch

INDUCTOR = "inductor"  # kInductor in selection_file.h


@dataclass(frozen=True)
class InForce:
    rules: tuple  # the file's rules as the core read them: dicts {op, dispatch_key, dtype, buckets}
    # (op, dispatch key) that a preference of the op's own serves: it overrides the file
    # (selection.h), as the core reports it (a preferred plugin that does not offer the op
    # there does not).
    preferred: frozenset
    # (op, dispatch key) -> the plugin the core's selector serves it with now (no file's split).
    serving: dict = field(default_factory=dict)
    # The loaded plugins of kind triton, whose calls are traced into the graph (triton_trace.py).
    triton: frozenset = frozenset()

    @property
    def names_inductor(self) -> bool:
        return any(b["plugin"] == INDUCTOR for r in self.rules for b in r["buckets"])

    @property
    def serves_triton(self) -> bool:
        """Whether some call may be served by a plugin of kind triton, which the pass traces."""
        return bool(self.triton) and (any(p in self.triton for p in self.serving.values()) or
                                      any(b["plugin"] in self.triton for r in self.rules for b in r["buckets"]))

    @property
    def changes_graphs(self) -> bool:
        return self.names_inductor or self.serves_triton

    def rule(self, op: str, dispatch_key: str, dtype: str) -> dict | None:
        """The rule for calls of op on dispatch_key in dtype: the one naming that dtype, else
        the one naming none; None where the op has a preference of its own."""
        if (op, dispatch_key) in self.preferred:
            return None
        found = [r for r in self.rules if r["op"] == op and r["dispatch_key"] == dispatch_key]
        return next((r for r in found if r["dtype"] == dtype), None) or next((r for r in found if not r["dtype"]), None)

    def digest(self) -> str:
        """What the compile cache key must see of the selection: "none" where no bucket names
        `inductor` and no plugin of kind triton serves (the pass then changes no graph, and
        plugin buckets are chosen at run time by the core's selector, not in the code); else
        a digest of the rules, the preferences, what serves each op, the plugins loaded, the
        references traced and the triton plugins' code (neither a fixed reference nor a
        changed kernel may be served from the cache of the one before it)."""
        if not self.changes_graphs:
            return "none"
        import backplane

        from ..triton_kind import code_digest, loaded_plugins

        loaded = sorted((b.name, b.version, b.path) for b in backplane.backends() if b.status == "loaded")
        named = {r["op"] for r in self.rules if any(b["plugin"] == INDUCTOR for b in r["buckets"])}
        references = sorted((op.name, op.reference) for op in backplane.ops() if op.name in named)
        triton = sorted((name, code_digest(b)) for name, b in loaded_plugins().items() if name in self.triton)
        serving = sorted(f"{op}:{key}:{p}" for (op, key), p in self.serving.items())
        text = json.dumps([self.rules, sorted(self.preferred), loaded, references, triton, serving], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


def in_force() -> InForce:
    """The file's rules and the preferences that override them, from one call of the core."""
    from .._native import core

    from ..triton_kind import loaded_plugins

    state = core().serving()
    preferred = frozenset((r["op"], r["dispatch_key"]) for r in state["serving"]
                          if r["why"] == f"preferred for {r['op']}")
    serving = {(r["op"], r["dispatch_key"]): r["serving"] for r in state["serving"]}
    return InForce(tuple(state["rules"]), preferred, serving, frozenset(loaded_plugins()))


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
