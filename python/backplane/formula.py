"""The registry's call grammar, evaluated in Python over torch.ops: an op's `reference:`,
`baseline:` and `backward:` formulas become callables, so Python tools time PyTorch's side
of any registry op (and take its gradients through autograd) with no code per op.

    f = Formula.parse("aten::mul.Tensor(aten::silu(gate), up)")
    f(gate=g, up=u)         # torch.ops.aten.mul.Tensor(torch.ops.aten.silu.default(g), u)
    f.names()               # {"gate", "up"}

The grammar is the core's (core/src/formula/reference_expr.h), which the
conformance suite and the build's checks use: calls `ns::op[.overload](args)` (no
overload: the default one; arguments positional or `name=`), argument names, `box[0]`,
`dtype(x)`, numbers, strings (`'tanh'` or `"tanh"`, no escapes), true, false, None and lists
`[a, b]`, e.g. `aten::gelu(x, approximate='tanh')`. A formula whose outermost expression is a
list gives a list (one value per output).

One grammar, parsed in one place: the core's parser (core/src/formula/formula_parse.cpp),
through the C API (backplane_c_formula_tree), gives the tree and every syntax error; this
module only evaluates the tree. Parsing therefore needs libbackplane_core, opened on first
use as backplane._native finds it; importing this module does not. The core evaluates formulas too (conformance, autograd,
forward AD), so there are two evaluators: tests/python/autograd/test_formula_agreement.py runs every
registry formula through both and requires the same calls, arguments and results.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class _Node:
    kind: str  # call | name | index | dtype | literal | list
    name: str = ""  # call: "aten::add"; name, index, dtype: the argument
    overload: str = ""  # call
    index: int = 0  # index
    value: Any = None  # literal
    args: tuple = ()  # call: ((keyword or "", node), ...); list: (node, ...)


class FormulaError(ValueError):
    """A formula that does not parse (the core parser's message, naming the formula and the
    column), or one evaluated without a name it reads."""


@functools.lru_cache(maxsize=1024)  # nodes are immutable: one text's tree serves every caller
def _parse(text: str) -> _Node:
    from ._native import core

    try:
        return _node(core().formula_tree(text))
    except ValueError as e:  # the core's status 3: its FormulaError
        raise FormulaError(str(e)) from None


def _node(tree: dict) -> _Node:
    """A _Node from the core's JSON tree (backplane_c_formula_tree in core/src/c_api/formula_tree.cpp)."""
    kind = tree["kind"]
    if kind == "call":
        args = tuple((a["keyword"], _node(a["value"])) for a in tree["args"])
        return _Node(kind, name=tree["name"], overload=tree["overload"], args=args)
    if kind == "list":
        return _Node(kind, args=tuple(_node(item) for item in tree["items"]))
    if kind == "literal":
        return _Node(kind, value=tree["value"])
    return _Node(kind, name=tree["name"], index=tree.get("index", 0))  # name, index, dtype


class Formula:
    """A parsed formula; calling it with the names it uses evaluates it."""

    def __init__(self, text: str, root: _Node):
        self.text = text
        self._root = root

    @classmethod
    def parse(cls, text: str) -> Formula:
        return cls(text, _parse(text))

    @property
    def tree(self) -> _Node:
        """The parsed expression, for tools that read a formula rather than run it
        (sharding/formula_facts.py): nodes of kind call, name, index, dtype, literal, list."""
        return self._root

    def names(self) -> set[str]:
        """The argument names the formula reads (`grad` and `result` included where used)."""
        found, stack = set(), [self._root]
        while stack:
            node = stack.pop()
            if node.kind in ("name", "index", "dtype"):
                found.add(node.name)
            stack.extend(n for _, n in node.args) if node.kind == "call" else stack.extend(node.args)
        return found

    def __call__(self, /, **names):  # positional-only self: an argument may be named `self`
        return self._eval(self._root, names)

    def _eval(self, node: _Node, names: dict):
        if node.kind == "literal":
            return node.value
        if node.kind == "list":
            return [self._eval(item, names) for item in node.args]
        if node.kind in ("name", "index", "dtype"):
            if node.name not in names:
                raise FormulaError(f"formula '{self.text}' reads '{node.name}', which was not given")
            value = names[node.name]
            return value[node.index] if node.kind == "index" else value.dtype if node.kind == "dtype" else value
        import torch

        ns, op = node.name.split("::")
        overload = getattr(getattr(getattr(torch.ops, ns), op), node.overload or "default")
        args = [self._eval(n, names) for keyword, n in node.args if not keyword]
        kwargs = {keyword: self._eval(n, names) for keyword, n in node.args if keyword}
        if _times_one(node, args, kwargs):
            return args[0]
        result = overload(*args, **kwargs)
        # Several return values come back as a tuple, a Tensor[] as a list: inside another call
        # the first of several is the value (as in C++), a list stays whole.
        return result[0] if isinstance(result, tuple) and node is not self._root else result


def _times_one(node: _Node, args: list, kwargs: dict) -> bool:
    """aten::mul.Scalar of a floating tensor by the real scalar 1: the tensor itself, no
    call, as in the C++ evaluator (add's gradient for b at the usual alpha=1). Anything
    else may change the dtype, so it is called."""
    import torch

    if node.name != "aten::mul" or node.overload != "Scalar":
        return False
    values = args + list(kwargs.values())
    return (len(values) == 2 and isinstance(values[0], torch.Tensor) and values[0].is_floating_point()
            and isinstance(values[1], (int, float)) and not isinstance(values[1], bool) and values[1] == 1)
