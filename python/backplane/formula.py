"""The registry's call grammar, evaluated in Python over torch.ops: an op's `reference:`,
`baseline:` and `backward:` formulas become callables, so Python tools time PyTorch's side
of any registry op (and take its gradients through autograd) with no code per op.

    f = Formula.parse("aten::mul.Tensor(aten::silu(gate), up)")
    f(gate=g, up=u)         # torch.ops.aten.mul.Tensor(torch.ops.aten.silu.default(g), u)
    f.names()               # {"gate", "up"}

The grammar is the C++ evaluator's (core/include/backplane/reference_expr.h), which the
conformance suite and the build's checks use: calls `ns::op[.overload](args)` (no
overload: the default one; arguments positional or `name=`), argument names, `box[0]`,
`dtype(x)`, numbers, strings (`'tanh'` or `"tanh"`, no escapes), true, false, None and lists
`[a, b]`, e.g. `aten::gelu(x, approximate='tanh')`. A formula whose outermost expression is a
list gives a list (one value per output).

Two evaluators of one grammar, because the C API evaluates no formula:
tests/python/test_formula_agreement.py runs every registry formula through both and
requires the same calls, arguments and results.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# '::', a name, a number, a string ('...' or "...", no escapes), an unterminated string, or one character.
_TOKEN = re.compile(r"""\s*(?:(::)|([A-Za-z_]\w*)|(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|('[^']*'|"[^"]*")|(['"])|(.))""")
_KINDS = {1: "::", 2: "ident", 3: "number", 4: "string", 5: "unterminated", 6: "punct"}


@dataclass(frozen=True)
class _Node:
    kind: str  # call | name | index | dtype | literal | list
    name: str = ""  # call: "aten::add"; name, index, dtype: the argument
    overload: str = ""  # call
    index: int = 0  # index
    value: Any = None  # literal
    args: tuple = ()  # call: ((keyword or "", node), ...); list: (node, ...)


class FormulaError(ValueError):
    """A formula that does not parse, naming the formula and the column."""


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = []  # (kind, text, column)
        for m in _TOKEN.finditer(text):
            if m.end() == m.start():
                break
            kind = next(i for i in _KINDS if m.group(i) is not None)
            if _KINDS[kind] == "unterminated":
                raise FormulaError(f"formula '{text}', column {m.start(kind) + 1}: unterminated string: no closing {m.group(kind)}")
            self.tokens.append((_KINDS[kind], m.group(kind), m.start(kind) + 1))
        self.pos = 0
        self.depth = 0

    def fail(self, what: str, column: int | None = None):
        if column is None:
            column = self.tokens[self.pos][2] if self.pos < len(self.tokens) else len(self.text) + 1
        raise FormulaError(f"formula '{self.text}', column {column}: {what}")

    def peek(self, text: str | None = None, kind: str | None = None) -> bool:
        if self.pos >= len(self.tokens):
            return False
        k, t, _ = self.tokens[self.pos]
        return (text is None or t == text) and (kind is None or k == kind)

    def take(self, text: str | None = None, kind: str | None = None) -> str:
        if not self.peek(text, kind):
            self.fail(f"expected {text or kind}")
        self.pos += 1
        return self.tokens[self.pos - 1][1]

    def parse(self) -> _Node:
        node = self.expr()
        if self.pos != len(self.tokens):
            self.fail(f"unexpected '{self.tokens[self.pos][1]}'")
        return node

    _MAX_DEPTH = 100  # as the C++ parser: calls and lists nest by recursion

    def expr(self) -> _Node:
        if self.depth == self._MAX_DEPTH:
            self.fail(f"nested deeper than {self._MAX_DEPTH} calls or lists")
        self.depth += 1
        try:
            return self._expr()
        finally:
            self.depth -= 1

    def _expr(self) -> _Node:
        if self.peek("["):
            self.take("[")
            return _Node("list", args=self.items(self.expr, "]"))
        if self.peek(kind="number"):
            text = self.take(kind="number")
            return _Node("literal", value=float(text) if re.search(r"[.eE]", text) else int(text))
        if self.peek(kind="string"):
            return _Node("literal", value=self.take(kind="string")[1:-1])
        if not self.peek(kind="ident"):
            self.fail("expected an expression")
        column = self.tokens[self.pos][2]
        name = self.take(kind="ident")
        if name in ("true", "false", "None") and not self.peek("::"):
            return _Node("literal", value={"true": True, "false": False, "None": None}[name])
        if self.peek("::"):
            self.take("::")
            name += "::" + self.take(kind="ident")
            overload = ""
            if self.peek("."):
                self.take(".")
                overload = self.take(kind="ident")
            self.take("(")
            return _Node("call", name=name, overload=overload, args=self.items(self.argument, ")"))
        if self.peek("("):
            if name != "dtype":
                self.fail(f"unknown function '{name}'; ops name their namespace (aten::add.Tensor), "
                          "and the one built-in is dtype(tensor)", column)
            self.take("(")
            arg = self.take(kind="ident")
            self.take(")")
            return _Node("dtype", name=arg)
        if self.peek("["):
            self.take("[")
            if self.peek(kind="number") and not re.fullmatch(r"-?\d+", self.tokens[self.pos][1]):
                self.fail(f"an index is an integer, found '{self.tokens[self.pos][1]}'")
            text = self.take(kind="number")
            index = int(text)
            self.take("]")
            return _Node("index", name=name, index=index)
        return _Node("name", name=name)

    def items(self, item, closing: str) -> tuple:
        """item(), item(), ... up to `closing` (taken); none at all is allowed."""
        found = []
        if not self.peek(closing):
            found.append(item())
            while self.peek(","):
                self.take(",")
                found.append(item())
        self.take(closing)
        return tuple(found)

    def argument(self):
        if self.peek(kind="ident") and self.pos + 1 < len(self.tokens) and self.tokens[self.pos + 1][1] == "=":
            keyword = self.take(kind="ident")
            self.take("=")
            return (keyword, self.expr())
        return ("", self.expr())


class Formula:
    """A parsed formula; calling it with the names it uses evaluates it."""

    def __init__(self, text: str, root: _Node):
        self.text = text
        self._root = root

    @classmethod
    def parse(cls, text: str) -> Formula:
        return cls(text, _Parser(text).parse())

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
