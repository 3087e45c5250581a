"""An op's sharding rule, from its registry entry: the `sharding:` key where the entry
has one, else derived (docs/distributed.md):

- broadcast and same_as ops (and ops that write, in_place and out) whose reference calls
  only pointwise PyTorch ops are pointwise;
- any other op without the key refuses DTensor inputs, naming the key, rather than guess.

Partial inputs are allowed where the reference is linear in them (formula_facts.py). No
DTensor here: rules are plain data, so they can be listed (`describe`) and tested alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from ..formula import Formula, FormulaError
from . import formula_facts

_ELEMENTWISE_SHAPES = {"same_as", "broadcast", "in_place", "out"}


@dataclass(frozen=True)
class Rule:
    op: str  # "backplane::add", "acme::fused_gelu"
    kind: str  # pointwise | mixes | replicate | none
    tensor_args: tuple[str, ...]
    mixes: int = 0  # mixes: trailing dimensions read across
    summed: tuple[int, ...] = ()  # mixes: outputs summing over the dimensions they lack
    linear: tuple[frozenset, ...] = ()  # sets of Tensor arguments the op is linear in together
    written: str = ""  # the argument an in_place or out op writes
    why: str = ""  # where the rule comes from, or (kind none) why DTensor is refused

    def describe(self) -> str:
        """One line: `backplane::rms_norm: mixes 1 (registry ...); Partial in {weight}`."""
        what = {"mixes": f"mixes {self.mixes}" + (f", summed outputs {list(self.summed)}" if self.summed else "")}
        text = f"{self.op}: {what.get(self.kind, self.kind)} ({self.why})"
        if self.written:
            text += f"; writes {self.written}"
        if self.linear:
            text += "; Partial in " + ", ".join("{" + ", ".join(sorted(s)) + "}" for s in self.linear)
        return text


def rule_for(row: dict) -> Rule:
    """The rule of one op, from its core().ops() row (name, namespace, tensor_args,
    reference, shape, sharding)."""
    op = f"{row['namespace']}::{row['name'].rpartition('::')[2]}"
    shapes = row["shape"]
    written = shapes[0]["args"][0] if shapes[0]["kind"] in ("in_place", "out") else ""
    declared = row["sharding"]
    reference = _parse(row["reference"])
    common = dict(op=op, tensor_args=tuple(row["tensor_args"]), written=written)
    limit = _dtensor_limit(op, row["schema"])
    if limit:
        return Rule(kind="none", why=limit, **common)
    if declared["kind"] != "derived":
        kind = declared["kind"]
        why = f"sharding: in the registry, {declared['where']}" if declared["where"] else "sharding: in the registry"
        if kind == "none":
            why = f"its registry entry says sharding: none ({declared['where']})"
        linear = _linear_sets(reference, row["tensor_args"], written) if kind in ("pointwise", "mixes") else ()
        return Rule(kind=kind, mixes=declared["mixes"], summed=tuple(declared["summed"]), linear=linear, why=why, **common)
    refusal = _not_pointwise(reference, shapes)
    if refusal:
        return Rule(kind="none", why=f"its registry entry has no sharding: key and {refusal}; add one "
                                     "(docs/distributed.md)", **common)
    return Rule(kind="pointwise", linear=_linear_sets(reference, row["tensor_args"], written),
                why="derived: an elementwise shape and a pointwise reference", **common)


def _dtensor_limit(op: str, schema: str) -> str:
    """Why DTensor cannot run the op whatever its entry says; "" when it can."""
    import torch

    parsed = torch._C.parse_schema(f"{op}{schema[schema.index('('):]}")
    out = next((a.name for a in parsed.arguments if a.is_out), None)
    if out and not parsed.returns:
        # DTensor takes any op with a keyword-only written argument for an out= variant,
        # which returns that argument; one returning nothing fails in its dispatch.
        return (f"it writes the keyword argument '{out}' and returns nothing, which DTensor cannot dispatch (it "
                f"takes the op for an out= variant returning '{out}'); call it on local tensors (DTensor.to_local())")
    return ""


def _parse(text: str) -> Formula | None:
    try:
        return Formula.parse(text) if text else None
    except FormulaError:
        return None  # the build checks every formula; an unreadable one implies nothing here


def _not_pointwise(reference: Formula | None, shapes: list[dict]) -> str:
    """Why the entry does not imply a pointwise op; "" when it does."""
    custom = [s.get("custom") or s["kind"] for s in shapes if s["kind"] not in _ELEMENTWISE_SHAPES]
    if custom:
        return f"its shape rule is custom ({custom[0]})"
    if reference is None:
        return "it has no reference to tell whether it is pointwise"
    call = formula_facts.non_pointwise_call(reference)
    if call is not None:
        overload = f".{call.overload}" if call.overload else ""
        return f"its reference calls {call.name}{overload}, which is not a pointwise PyTorch op"
    return ""


def _linear_sets(reference: Formula | None, tensor_args, written: str) -> tuple[frozenset, ...]:
    """Every set of Tensor arguments the reference is linear in together. An out op's
    written argument is no input of the formula."""
    if reference is None:
        return ()
    inputs = [a for a in tensor_args if not (written and a == written and a not in reference.names())]
    found = []
    for size in range(1, len(inputs) + 1):
        for names in combinations(inputs, size):
            if formula_facts.linear_in(reference, set(names)):
                found.append(frozenset(names))
    return tuple(found)
