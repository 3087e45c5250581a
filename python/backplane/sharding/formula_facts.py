"""What an op's `reference:` formula says about sharding, read from the formula itself:

- pointwise: every PyTorch op it calls carries torch.Tag.pointwise (PyTorch's own mark of
  elementwise ops), so each output element reads only the same (broadcast) element of
  each input: any dimension may be sharded.
- linear_in(names): the formula is linear in those Tensor arguments together, the others
  held fixed (f(x1 + x2) = f(x1) + f(x2)): where they are Partial (a sum, or an average,
  pending over ranks), the op may run on each rank's part and leave its output Partial,
  with no collective.

Both are conservative: a call the analysis does not know is neither pointwise-proven
nor linear, which costs at most a collective, never a wrong number.
"""
from __future__ import annotations

from ..formula import Formula

# How PyTorch ops pass linearity through, by aten op name (any overload unless listed
# with one). These are PyTorch's ops, not Backplane's: Backplane's own ops are described
# by their registry entries only.
_SUMS = {"aten::add.Tensor", "aten::sub.Tensor"}  # linear in all their Tensor arguments together
_PRODUCTS = {"aten::mul.Tensor"}  # linear in one factor while the other is fixed
_DIVIDES = {"aten::div.Tensor"}  # linear in the numerator, the denominator fixed
# Linear in their first argument, every other argument fixed: scaling, sign, copies, views,
# reshapes, concatenation (its list argument), sums or means over dimensions, and the
# backward ops of pointwise functions (grad_output times the derivative at the input).
_LINEAR_MAPS = {
    "aten::silu_backward", "aten::gelu_backward", "aten::sigmoid_backward", "aten::tanh_backward",
    "aten::mul.Scalar", "aten::div.Scalar", "aten::neg", "aten::clone", "aten::contiguous", "aten::narrow",
    "aten::slice", "aten::select", "aten::unflatten", "aten::flatten", "aten::unsqueeze", "aten::squeeze",
    "aten::view", "aten::reshape", "aten::permute", "aten::transpose", "aten::t", "aten::expand", "aten::cat",
    "aten::sum", "aten::mean",
}

CONST, LINEAR, OTHER = "const", "linear", "other"


def calls(formula: Formula):
    """Every call node of the formula, outermost first."""
    stack = [formula.tree]
    while stack:
        node = stack.pop()
        if node.kind == "call":
            yield node
            stack.extend(n for _, n in node.args)
        elif node.kind == "list":
            stack.extend(node.args)


def non_pointwise_call(formula: Formula):
    """The first call that is not a PyTorch op tagged pointwise (a registry op's call is
    not one), or None when every call is."""
    import torch

    for node in calls(formula):
        namespace, op = node.name.split("::")
        overload = getattr(getattr(torch.ops.aten, op, None), node.overload or "default", None)
        if namespace != "aten" or overload is None or torch.Tag.pointwise not in overload.tags:
            return node
    return None


def outputs(formula: Formula) -> list:
    """The formula's result expressions: one per output (a top-level list gives several)."""
    root = formula.tree
    return list(root.args) if root.kind == "list" else [root]


def linear_in(formula: Formula, names: set[str]) -> bool:
    """Whether every output is linear in `names` together (homogeneous of degree one:
    an output that does not read them at all is not)."""
    return all(_degree(node, names) == LINEAR for node in outputs(formula))


def _degree(node, names: set[str]) -> str:
    if node.kind in ("literal", "dtype", "index"):
        return CONST  # a dtype or a list element is no tensor value
    if node.kind == "name":
        return LINEAR if node.name in names else CONST
    if node.kind == "list":
        return _all_same([_degree(n, names) for n in node.args])
    key = f"{node.name}.{node.overload}" if node.overload else node.name
    degrees = [_degree(n, names) for _, n in node.args]
    if all(d == CONST for d in degrees):
        return CONST
    if key in _SUMS:  # the two operands; alpha must be fixed. x + c is affine, not linear
        return _all_same(degrees[:2]) if all(d == CONST for d in degrees[2:]) else OTHER
    if key in _PRODUCTS:
        return LINEAR if sorted(degrees) == [CONST, LINEAR] else OTHER
    if key in _DIVIDES:
        return LINEAR if degrees == [LINEAR, CONST] else OTHER
    if key in _LINEAR_MAPS or node.name in _LINEAR_MAPS:
        return LINEAR if degrees[0] == LINEAR and all(d == CONST for d in degrees[1:]) else OTHER
    return OTHER


def _all_same(degrees: list[str]) -> str:
    if all(d == CONST for d in degrees):
        return CONST
    return LINEAR if all(d == LINEAR for d in degrees) else OTHER
