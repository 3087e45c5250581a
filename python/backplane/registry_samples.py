"""An op's registry sample as a ready call: the arguments a user would write, with random
tensors. Benchmarks, tests and quick experiments get a call of any op (a new one, or a
loaded plugin's own) from its registry entry, with no code per op.

    op = next(o for o in backplane.ops() if o.name == "rms_norm")
    args, kwargs = backplane.sample_call(op, device="cuda", dtype=torch.bfloat16)
    torch.ops.backplane.rms_norm(*args, **kwargs)
"""
from __future__ import annotations

import torch


def sample_values(op, index: int = 0, *, dtype=torch.float32, device="cpu", seed: int = 0) -> dict:
    """The arguments registry sample `index` of `op` (an OpInfo) gives, by name: each Tensor
    argument N(0, 1) of the sample's sizes, times the sample's `magnitude` (1 unless it
    states one), in `dtype` on `device` (drawn and scaled in float64 on the CPU from `seed`,
    so every device and dtype gets the same values), every other argument (a number, a
    string, an int list) as the sample states it. Arguments the sample leaves out (those
    with defaults) are absent."""
    if not op.samples:
        raise ValueError(f"{op.name} has no registry samples")
    if not 0 <= index < len(op.samples):
        raise IndexError(f"{op.name} has {len(op.samples)} registry samples, asked for sample {index}")
    g = torch.Generator().manual_seed(seed)
    sample = op.samples[index]
    magnitude = sample.get("magnitude", 1.0)
    values = {}
    for name, given in sample["args"].items():
        if name in op.tensor_args:
            drawn = torch.randn(given, generator=g, dtype=torch.float64)
            values[name] = (drawn * magnitude if magnitude != 1.0 else drawn).to(device=device, dtype=dtype)
        else:
            values[name] = given
    return values


def sample_call(op, index: int = 0, *, dtype=torch.float32, device="cpu", seed: int = 0) -> tuple[list, dict]:
    """(args, kwargs) for `op`'s registry sample `index`, as a user writes the call: the
    leading positional arguments in order, the rest (keyword-only ones, and any after an
    argument left to its default) by keyword. Values as sample_values gives them."""
    from . import torch_op

    values = sample_values(op, index, dtype=dtype, device=device, seed=seed)
    args, kwargs = [], {}
    for position, arg in enumerate(torch_op(op.name).default._schema.arguments):
        if arg.name not in values:
            continue
        if not arg.kwarg_only and len(args) == position:
            args.append(values[arg.name])
        else:
            kwargs[arg.name] = values[arg.name]
    return args, kwargs
