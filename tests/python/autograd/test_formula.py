"""backplane.formula: the registry's formulas evaluated in Python (what the bench's torch.compile
rows compile as PyTorch's side). Each op's reference, evaluated here in float64, must give what the
op gives on its first registry sample; bad formulas are refused naming the column, in the words
of the core's parser (core/src/registry/formula_parse.cpp), which parses for Python too."""
import re

import pytest
import torch

import backplane
from backplane.formula import Formula, FormulaError

from samples import op_names, results


def _first_sample(op, schema):
    """The op's first registry sample in float64, with the schema's defaults."""
    return {**{a.name: a.default_value for a in schema.arguments if a.has_default_value()},
            **backplane.sample_values(op, dtype=torch.float64)}


@pytest.mark.parametrize("name", op_names())
def test_reference_agrees_with_the_op(name):
    op = next(o for o in backplane.ops() if o.name == name)
    if not op.reference:
        pytest.skip(f"{name} has no reference")
    packet = backplane.torch_op(name)
    schema = packet.default._schema
    values = _first_sample(op, schema)
    expected = Formula.parse(op.reference)(**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in values.items()})
    args = [values[a.name] for a in schema.arguments if not a.kwarg_only]
    kwargs = {a.name: values[a.name] for a in schema.arguments if a.kwarg_only}
    got = results(packet, packet(*args, **kwargs), args, kwargs)
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    assert len(got) == len(expected)
    for g_, e in zip(got, expected):
        torch.testing.assert_close(g_, e)


def test_names_dtype_index_and_keywords():
    f = Formula.parse("aten::_softmax_backward_data(grad, y, -1, dtype(y))")
    assert f.names() == {"grad", "y"}
    g, y = torch.randn(2, 5), torch.softmax(torch.randn(2, 5), -1)
    torch.testing.assert_close(f(grad=g, y=y), torch._softmax_backward_data(g, y, -1, torch.float32))
    crop = Formula.parse("aten::narrow(img, -1, box[1], box[3])")
    assert crop(img=torch.arange(10.0).reshape(2, 5), box=[0, 1, 2, 3]).tolist() == [[1.0, 2.0, 3.0], [6.0, 7.0, 8.0]]
    add = Formula.parse("aten::add.Tensor(a, b, alpha=alpha)")
    assert add(a=torch.ones(2), b=torch.ones(2), alpha=2.5).tolist() == [3.5, 3.5]
    assert Formula.parse("aten::neg.default(self)")(self=torch.ones(1)).tolist() == [-1.0]  # aten's usual name
    # Inside a call, several return values give the first; a Tensor[] stays whole.
    assert Formula.parse("aten::neg.default(aten::max.dim(x, -1))")(x=torch.tensor([[1.0, 3.0]])).tolist() == [-3.0]
    halves = Formula.parse("aten::cat(aten::chunk(x, 2, -1), 0)")(x=torch.arange(4.0).reshape(1, 4))
    assert halves.tolist() == [[0.0, 1.0], [2.0, 3.0]]


@pytest.mark.parametrize("name", op_names())
def test_baseline_agrees_with_the_reference(name):
    # (the build checks the same in C++; this checks the Python evaluation of both)
    op = next(o for o in backplane.ops() if o.name == name)
    if not op.baseline:
        pytest.skip(f"{name} has no baseline")
    values = _first_sample(op, backplane.torch_op(name).default._schema)
    torch.testing.assert_close(Formula.parse(op.baseline)(**values), Formula.parse(op.reference)(**values))


def test_strings_and_none_are_arguments():
    # PyTorch's fused op as a reference or baseline: aten::gelu's approximate is a str.
    x = torch.randn(7, dtype=torch.float64)
    tanh = Formula.parse("aten::gelu(x, approximate='tanh')")
    assert tanh.names() == {"x"}
    torch.testing.assert_close(tanh(x=x), torch.nn.functional.gelu(x, approximate="tanh"))
    torch.testing.assert_close(Formula.parse('aten::gelu(x, approximate="none")')(x=x), torch.nn.functional.gelu(x))
    torch.testing.assert_close(Formula.parse("aten::sum.dim_IntList(x, None)")(x=x), x.sum())


@pytest.mark.parametrize("text, message", [
    ("aten::gelu(x, approximate='tanh)", "column 27: unterminated string: no closing '"),
    ("[" * 101 + "]" * 101, "column 101: nested deeper than 100 calls or lists"),
    ("mul(grad, 2)", "column 1: unknown function 'mul'; ops name their namespace (aten::add.Tensor), and the one built-in is dtype(tensor)"),
    ("aten::mul(grad", "column 15: expected ')'"),  # the core parser's words (Python's own said `expected )`)
    ("aten::add.Tensor(a, b) x", "column 24: unexpected 'x'"),
    ("aten::narrow(img, -1, box[1.5], box[3])", "column 27: an index is an integer, found '1.5'"),
])
def test_bad_formulas_are_refused_naming_the_column(text, message):
    with pytest.raises(FormulaError, match=re.escape(f"formula '{text}', {message}")):
        Formula.parse(text)


def test_the_whole_text_reaches_the_parser():
    # The C API takes the text with its length: a NUL does not end the formula early.
    with pytest.raises(FormulaError, match="formula 'aten::neg.default\\(x\\)"):
        Formula.parse("aten::neg.default(x)\x00junk")


def test_the_tree_is_the_core_parsers():
    # What sharding/formula_facts.py reads: kinds, names, overloads, keywords and literals.
    tree = Formula.parse("aten::gelu.default([x, box[2]], approximate='tanh', scale=1.0, n=2, flag=None)").tree
    assert (tree.kind, tree.name, tree.overload) == ("call", "aten::gelu", "default")
    (_, items), *keywords = tree.args
    assert [(n.kind, n.name, n.index) for n in items.args] == [("name", "x", 0), ("index", "box", 2)]
    assert [(k, n.kind, n.value, type(n.value)) for k, n in keywords] == [
        ("approximate", "literal", "tanh", str), ("scale", "literal", 1.0, float), ("n", "literal", 2, int),
        ("flag", "literal", None, type(None))]


def test_a_name_not_given_is_named():
    with pytest.raises(FormulaError, match="formula 'aten::neg.default\\(x\\)' reads 'x', which was not given"):
        Formula.parse("aten::neg.default(x)")()


def test_a_multiply_by_one_is_the_tensor_itself_as_in_cpp():
    # The C++ evaluator's rule (add's gradient for b at alpha=1); test_formula_agreement.py
    # holds the two evaluators together.
    x = torch.randn(3)
    assert Formula.parse("aten::mul.Scalar(x, 1)")(x=x) is x
    assert Formula.parse("aten::mul.Scalar(x, 2)")(x=x) is not x
    n = torch.arange(3)
    assert Formula.parse("aten::mul.Scalar(n, 1)")(n=n) is not n  # not floating: called
    assert Formula.parse("aten::mul.Scalar(x, true)")(x=x) is not x  # a bool is no number here
