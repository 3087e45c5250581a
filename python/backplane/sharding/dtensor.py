"""Registers rules with DTensor, through its public register_sharding, so a DTensor
argument to a Backplane op runs on each rank's local tensor under the op's rule.

register_sharding caches a decision per input placements and, of the other arguments,
only int ones; crop's box (an int list) changes the output's size, so every non-Tensor
argument is made part of the key here (a stale cached size would be a wrong DTensor).
"""
from __future__ import annotations

import dataclasses

import torch

from .rules import Rule
from .strategies import placements


def register(rule: Rule, overload) -> None:
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.experimental import register_sharding

    schema = overload._schema

    def strategy(*args, **kwargs):
        named = dict(zip((a.name for a in schema.arguments), args))
        named.update(kwargs)
        choices = placements(rule, named, _output_shapes(overload, named))
        # register_sharding's input placements: one per positional argument (None for a
        # non-Tensor), then the Tensor keyword arguments in the order they were passed.
        positional = [a.name for a in schema.arguments][:len(args)]
        keyword = [k for k in kwargs if k in rule.tensor_args]
        return [(outputs, [inputs.get(n) for n in positional] + [inputs[k] for k in keyword])
                for outputs, inputs in choices]

    register_sharding(overload)(strategy)
    propagator = DTensor._op_dispatcher.sharding_propagator
    info = propagator.op_to_schema_info.get(overload)
    if info is not None:
        keywords = [a.name for a in schema.arguments if a.kwarg_only and a.name not in rule.tensor_args]
        propagator.op_to_schema_info[overload] = dataclasses.replace(
            info, static_argnum=0, static_kwargkey=keywords or None)


def _output_shapes(overload, named: dict) -> list:
    """The op's output sizes for these global shapes, from its Meta kernel (the registry's
    shape rules); none for an op that writes an argument."""
    if not overload._schema.returns:
        return []
    meta = {}
    for name, value in named.items():
        shape = getattr(value, "shape", None)
        meta[name] = torch.empty(shape, device="meta", dtype=_dtype(value)) if shape is not None else value
    result = overload(**meta)
    return [tuple(r.shape) for r in (result if isinstance(result, (tuple, list)) else (result,))]


def _dtype(spec) -> torch.dtype:
    meta = getattr(spec, "tensor_meta", None)
    return meta.dtype if meta is not None else torch.float32
