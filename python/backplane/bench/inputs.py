"""An op's arguments for one of its registry bench presets, built as the engine builds
them (bench/op_workloads.cpp): every Tensor argument N(0, 1) in the preset's dtype, drawn
on the device, as the view its `layout:` names (core/src/conformance/inputs.cpp); every
other argument as the preset gives it, else the schema's default."""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch


def preset_label(name: str) -> str:
    """A preset's name as it appears in a row name: every character that is not a letter or
    a digit becomes '_' (as the engine's shape_label)."""
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in name)


def preset_for(op, label: str) -> dict:
    """The bench preset of `op` (an OpInfo) whose row label is `label`; ValueError naming
    the op's presets where none is."""
    for preset in op.bench:
        if preset_label(preset["name"]) == label:
            return preset
    known = ", ".join(p["name"] for p in op.bench) or "none"
    raise ValueError(f"{op.name} has no bench preset named {label!r}; its presets: {known}")


class _Layout(NamedTuple):
    least_dims: int                                     # dimensions the view needs
    base_sizes: Callable[[list], list]                  # the base tensor's sizes, for the view's
    view: Callable[[torch.Tensor, list], torch.Tensor]  # (base, the view's sizes) -> the view


_LAYOUTS = {
    "transposed": _Layout(2, lambda s: s[:-2] + s[-1:] + s[-2:-1], lambda base, s: base.transpose(-1, -2)),
    "strided": _Layout(1, lambda s: s[:-1] + [2 * s[-1]], lambda base, s: base[..., ::2]),
    "offset": _Layout(0, lambda s: [math.prod(s) + 5], lambda base, s: base[5:].view(s)),
    "expanded": _Layout(1, lambda s: [1] + s[1:], lambda base, s: base.expand(s)),
    "permuted": _Layout(3, lambda s: s[::-1], lambda base, s: base.permute(*reversed(range(len(s))))),
}


def laid_out(sizes, layout: str | None, *, dtype, device, generator, requires_grad=False) -> torch.Tensor:
    """N(0, 1) values of `sizes` in `layout`: None (contiguous), transposed (the last two
    dimensions swapped), strided (every other element of rows twice as long), offset (5
    elements into a flat buffer), expanded (one row, expanded), permuted (a base of the
    sizes reversed, its dimensions permuted back). With requires_grad the base requires
    grad and the view is returned: gradients are taken with respect to the view."""
    sizes = list(sizes)
    if layout is None:
        return torch.randn(sizes, dtype=dtype, device=device, generator=generator, requires_grad=requires_grad)
    if layout not in _LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected one of {', '.join(_LAYOUTS)}")
    spec = _LAYOUTS[layout]
    if len(sizes) < spec.least_dims:
        raise ValueError(f"{layout} layout does not fit {len(sizes)} dimensions (it needs {spec.least_dims})")
    base = torch.randn(spec.base_sizes(sizes), dtype=dtype, device=device, generator=generator,
                       requires_grad=requires_grad)
    return spec.view(base, sizes)


def preset_values(op, preset: dict, *, dtype, device, requires_grad=(), seed: int = 0) -> dict:
    """The op's arguments by name for `preset`: Tensors laid out as the preset says (those
    named in `requires_grad` requiring grad), other arguments as given or defaulted."""
    from .. import torch_op

    generator = torch.Generator(device=device).manual_seed(seed)
    schema = torch_op(op.name).default._schema
    values = {a.name: a.default_value for a in schema.arguments if a.has_default_value()}
    for name, given in preset["args"].items():
        if name in op.tensor_args:
            given = laid_out(given, preset.get("layout"), dtype=dtype, device=device, generator=generator,
                             requires_grad=name in requires_grad)
        values[name] = given
    return values
