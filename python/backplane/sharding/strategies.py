"""A rule (rules.py) as DTensor placements for one call: the list of (output placements,
input placements) that DTensor's register_sharding takes, for one mesh dimension (DTensor
expands it over every mesh dimension and picks the cheapest). Every choice here computes
on each rank's local tensors with no collective of its own; whatever collective a choice
needs happens in DTensor's redistribution of the inputs, where its cost is counted.

Limits: ops that write an argument keep its placements (the write must land in the tensor
the caller holds), so the other inputs follow it; on a mesh of several dimensions the
written tensor must have one placement on all of them, or the call is refused.
"""
from __future__ import annotations

from .rules import Rule

_PARTIAL_REDUCTIONS = ("sum", "avg")  # what a linear op passes through unchanged


class ShardingRefused(RuntimeError):
    """A call DTensor cannot run under the op's rule; the message names the rule and why."""


def placements(rule: Rule, args: dict, output_shapes: list) -> list[tuple[list, dict]]:
    """For `args` (argument name -> DTensorSpec for Tensor arguments, anything else for
    the rest) and the op's output shapes: [(output placements, {Tensor argument:
    placement}), ...], the choices that keep a written argument where it is."""
    found = choices(rule, args, output_shapes)
    if rule.written:
        found = _keeping_written(rule, args[rule.written], found)
    return found


def choices(rule: Rule, args: dict, output_shapes: list) -> list[tuple[list, dict]]:
    """Every choice the rule allows for these global shapes (specs need only `.shape`),
    whatever the written argument's placement."""
    from torch.distributed.tensor import Partial, Replicate

    tensors = {name: spec for name, spec in args.items() if name in rule.tensor_args and spec is not None}
    if rule.kind == "none":
        raise ShardingRefused(f"{rule.op} does not take DTensor inputs: {rule.why}")
    found = [([Replicate()] * len(output_shapes), {name: Replicate() for name in tensors})]
    if rule.kind in ("pointwise", "mixes"):
        found += _sharded(rule, tensors, output_shapes)
        for names in rule.linear:
            if names <= tensors.keys():
                for reduction in _PARTIAL_REDUCTIONS:
                    found.append(([Partial(reduction)] * len(output_shapes),
                                  {n: Partial(reduction) if n in names else Replicate() for n in tensors}))
    return found


def _sharded(rule: Rule, tensors: dict, output_shapes: list) -> list:
    """One choice per dimension of the iteration space that may be sharded: the Tensor
    arguments aligned from the right (as broadcasting aligns them), each sharded on its
    own dimension there, or replicated where it broadcasts (size 1, or no such dimension).
    A `mixes: N` op's last N dimensions are never sharded."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    rank = max((len(s.shape) for s in tensors.values()), default=0)
    space = [1] * rank
    for spec in tensors.values():
        for i, size in enumerate(spec.shape):
            d = rank - len(spec.shape) + i
            space[d] = max(space[d], size)
    shardable = rank - (rule.mixes if rule.kind == "mixes" else 0)
    found = []
    for d in range(shardable):
        if space[d] == 1:
            continue  # nothing to split
        inputs = {}
        for name, spec in tensors.items():
            i = d - (rank - len(spec.shape))
            inputs[name] = Shard(i) if i >= 0 and spec.shape[i] == space[d] else Replicate()
        outputs = []
        for index, shape in enumerate(output_shapes):
            o = d - (rank - len(shape))
            if o >= 0 and shape[o] == space[d]:
                outputs.append(Shard(o))
            elif index in rule.summed:
                outputs.append(Partial("sum"))  # each rank sums its rows
            else:
                break  # an output that neither has the dimension nor sums over it
        if len(outputs) == len(output_shapes):
            found.append((outputs, inputs))
    return found


def _keeping_written(rule: Rule, written, choices: list) -> list:
    placements = set(written.placements)
    if len(placements) > 1:
        raise ShardingRefused(
            f"{rule.op} writes '{rule.written}', which has placements {list(written.placements)}: on a mesh of several "
            "dimensions the written tensor must have one placement on all of them (DTensor could otherwise move it, "
            "and the write would land in a copy); redistribute it first")
    keep = next(iter(placements))
    kept = [c for c in choices if c[1][rule.written] == keep]
    if not kept:
        raise ShardingRefused(
            f"{rule.op} writes '{rule.written}', which is {keep!r}, and its rule ({rule.kind}; {rule.why}) has no choice "
            f"that keeps it so. Redistribute '{rule.written}' first")
    return kept
