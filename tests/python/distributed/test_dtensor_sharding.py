"""DTensor sharding rules generated from the registry (python/backplane/sharding/): what
each entry implies, and, in two gloo processes on the CPU, that every placement a rule
allows computes the op's full-tensor result with no collective of its own."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import backplane
from backplane.sharding import ShardingRefused, rule_for, strategies

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="this torch has no torch.distributed")


def _row(**changes):
    """A core().ops() row of an elementwise op, changed where a test says."""
    row = {"name": "twice", "namespace": "acme", "schema": "twice(Tensor x) -> Tensor", "tensor_args": ["x"],
           "reference": "aten::mul.Scalar(x, 2)",
           "shape": [{"kind": "same_as", "args": ["x"]}], "sharding": {"kind": "derived", "mixes": 0, "summed": [],
                                                                      "where": ""}}
    return {**row, **changes}


def test_every_registry_op_has_a_rule():
    rules = backplane.sharding.rules()
    assert backplane.sharding.status() == "on"
    for op in backplane.ops():
        assert f"{op.namespace}::{op.name}" in rules, op.name
    # The shipped registry's one refusal: an out= op returning nothing, which DTensor cannot dispatch.
    assert [r.op for r in rules.values() if r.kind == "none"] == ["backplane::sin_out"]
    assert "it writes the keyword argument 'out' and returns nothing" in rules["backplane::sin_out"].why


@pytest.mark.parametrize("op, kind, linear", [
    ("add", "pointwise", [{"a", "b"}]),            # a + alpha * b: linear in both together only
    ("mul", "pointwise", [{"a"}, {"b"}]),          # in either factor alone
    ("mul_backward", "pointwise", [{"grad"}, {"a", "b"}]),  # (grad * b, grad * a): each output in one of a, b
    ("silu_mul", "pointwise", [{"up"}]),           # silu(gate) is not linear
    ("silu_mul_backward", "pointwise", [{"grad"}]),  # silu_backward is linear in its grad_output
    ("rms_norm", "mixes", [{"weight"}]),           # x / rms(x) is scale-free, not linear
    ("rotary", "mixes", [{"x"}, {"cos", "sin"}]),  # x1 * cos - x2 * sin: in x, or in cos and sin together
    ("softmax", "mixes", []),
    ("crop", "mixes", [{"img"}]),
])
def test_rules_follow_the_entries(op, kind, linear):
    rule = backplane.sharding.rules()[f"backplane::{op}"]
    assert rule.kind == kind
    assert [set(s) for s in rule.linear] == linear


def test_written_arguments_and_summed_outputs():
    rules = backplane.sharding.rules()
    assert rules["backplane::scale_"].written == "x" and rules["backplane::scale_"].linear == (frozenset({"x"}),)
    assert rules["backplane::sin_out"].written == "out"
    assert rules["backplane::rms_norm_backward"].summed == (1,)
    assert "registry/ops.yaml:" in rules["backplane::rms_norm"].why


def test_an_entry_that_implies_nothing_is_refused_naming_the_key():
    rule = rule_for(_row(shape=[{"kind": "custom", "args": [], "custom": "twice"}]))
    assert rule.kind == "none"
    with pytest.raises(ShardingRefused, match=r"acme::twice does not take DTensor inputs: its registry entry has no "
                                              r"sharding: key and its shape rule is custom \(twice\); add one"):
        strategies.choices(rule, {}, [])
    rule = rule_for(_row(reference="aten::mean.dim(x, [-1], true)"))
    assert "its reference calls aten::mean.dim, which is not a pointwise PyTorch op" in rule.why
    assert "it has no reference" in rule_for(_row(reference="")).why


def test_declared_none_and_replicate():
    none = rule_for(_row(sharding={"kind": "none", "mixes": 0, "summed": [], "where": "acme.yaml:3:15"}))
    assert none.kind == "none" and "its registry entry says sharding: none (acme.yaml:3:15)" in none.why
    replicate = rule_for(_row(sharding={"kind": "replicate", "mixes": 0, "summed": [], "where": "acme.yaml:3:15"}))

    class Spec:
        shape = (4, 8)
    from torch.distributed.tensor import Replicate
    assert strategies.choices(replicate, {"x": Spec()}, [(4, 8)]) == [([Replicate()], {"x": Replicate()})]


def test_written_tensor_keeps_its_placement():
    from torch.distributed.tensor import Partial, Replicate, Shard
    # An in-place sin: pointwise, and not linear, so a Partial x cannot stay Partial.
    rule = rule_for(_row(name="sin_", schema="sin_(Tensor(a!) x) -> ()", reference="aten::sin(x)",
                         shape=[{"kind": "in_place", "args": ["x"]}]))
    assert (rule.kind, rule.written, rule.linear) == ("pointwise", "x", ())

    class Spec:
        def __init__(self, *placements):
            self.shape, self.placements = (4, 6), placements
    assert strategies.placements(rule, {"x": Spec(Shard(1))}, []) == [([], {"x": Shard(1)})]
    with pytest.raises(ShardingRefused, match=r"acme::sin_ writes 'x', which is Partial\(sum\), and its rule "
                                              r"\(pointwise; derived.*\) has no choice that keeps it so"):
        strategies.placements(rule, {"x": Spec(Partial())}, [])
    with pytest.raises(ShardingRefused, match="on a mesh of several dimensions the written tensor must have one "
                                              "placement on all of them"):
        strategies.placements(rule, {"x": Spec(Shard(0), Replicate())}, [])


def test_two_processes_every_allowed_placement_equals_the_full_op():
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'python'}:{ROOT}:{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", "BACKPLANE_BACKENDS": "none"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(ROOT / "tests/python/distributed/dtensor_checks.py")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    assert "none with a collective" in r.stdout and "gradients through DTensors" in r.stdout, r.stdout
