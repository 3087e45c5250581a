"""A forward+backward sample of a registry op as the engine defines one for a library
backend's `--backward` row (bench/backward_workloads.cpp), for the rows the engine cannot
time: those of plugins of kind triton (triton_rows.py). The engine's definition is C++
only, with no C API, so it is mirrored here, in this one place; each function names the C++
function it must match, and tests/python/bench/test_bench_triton_backward.py checks the two
agree on rms_norm (the inputs requiring grad, the output gradients' elements) against the
engine's JSON.

One sample: the op through the dispatcher (the core's Autograd kernel records the
registry's `backward:` formulas) and one torch.autograd.grad of its outputs that require
grad, for a fixed random gradient per output, into the Tensor arguments the `backward:`
names, in schema order. Gradients are returned, not accumulated into .grad. Before timing,
the gradients are checked against those of the op's `baseline:` (else its `reference:`),
differentiated by PyTorch on the same inputs and output gradients, normwise.

Limit: the output gradients are drawn from a generator of their own (seeded), the engine's
from ATen's default one: the same distribution, N(0, 1), not the same values."""
from __future__ import annotations

import torch

from ..formula import Formula

_GRADIENT_SEED = 1


def label(dtype: str, what: str) -> str:
    """A row's label: as `label` in backward_workloads.cpp ("float32 forward+backward backplane::rms_norm")."""
    return f"{dtype} forward+backward {what}"


def requiring_grad(op, values: dict) -> dict:
    """make_backward_inputs: the Tensor arguments the op's `backward:` names, in schema order,
    made to require grad in place ({name: tensor}). A view (a preset's layout) whose base
    does not require grad is a leaf of its own: gradients are taken with respect to the view."""
    names = [n for n in op.tensor_args if n in op.backward and isinstance(values.get(n), torch.Tensor)]
    for n in names:
        values[n].requires_grad_(True)
    return {n: values[n] for n in names}


def output_gradients(outputs: list) -> list:
    """output_gradients: one N(0, 1) tensor per output, of its sizes, dtype and device (a
    gradient of ones would hide softmax's: its rows sum to 1)."""
    generator = torch.Generator(device=outputs[0].device).manual_seed(_GRADIENT_SEED) if outputs else None
    return [torch.randn(o.shape, dtype=o.dtype, device=o.device, generator=generator) for o in outputs]


def gradients(op, outputs: list, output_grads: list, inputs: dict) -> tuple:
    """backward_of: the gradients of `inputs` for the outputs that require grad."""
    pairs = [(o, g) for o, g in zip(outputs, output_grads) if o.requires_grad]
    if not pairs:
        raise ValueError(f"no output of {op.namespace}::{op.name.rpartition('::')[2]} requires grad; expected a "
                         "graph to the arguments its backward: names")
    return torch.autograd.grad([o for o, _ in pairs], list(inputs.values()), [g for _, g in pairs])


def baseline_outputs(op, values: dict, count: int) -> list:
    """call_baseline: the first `count` values of the op's baseline (else reference) formula
    (a PyTorch op that also returns saved statistics gives more)."""
    found = Formula.parse(op.baseline or op.reference)(**values)
    found = list(found) if isinstance(found, (list, tuple)) else [found]
    if len(found) < count:
        raise ValueError(f"the baseline gives {len(found)} value(s) for {count} output(s)")
    return found[:count]


def normwise_disagreement(ours: torch.Tensor, theirs: torch.Tensor) -> str | None:
    """normwise_disagreement (backward_workloads.h): None when max |difference| <= tol *
    max(max |ours|, 1), tol 1e-4 in float32 and wider, 1e-2 in 16-bit types; else what differs
    (a NaN differs)."""
    if ours.shape != theirs.shape:
        return f"sizes {list(theirs.shape)} where backplane's are {list(ours.shape)}"
    if not ours.numel():
        return None
    tol = 1e-4 if ours.dtype in (torch.float32, torch.float64) else 1e-2
    a, b = ours.detach().double(), theirs.detach().double()
    scale, diff = a.abs().max().item(), (b - a).abs().max().item()
    if diff <= tol * max(scale, 1.0):
        return None
    return f"max |difference| {diff:.3g} against max |backplane's| {scale:.3g} (tolerance {tol:.3g} of it)"


class ForwardBackward:
    """backward_backplane_row's workload: `call()` is the op's forward through the
    dispatcher on `values` (its outputs, a list); building it makes the `backward:`'s
    arguments require grad and runs one forward for the output gradients.

    The first forward's graph is let go once its gradients are checked (disagreement()) or
    timing starts (step()): kept alive, its inputs' AccumulateGrad nodes stay those made on
    the stream of that forward (the default one), and a forward+backward captured into a
    CUDA graph on another stream then syncs with the default stream, which invalidates the
    capture (cudaErrorStreamCaptureInvalidated: every triton --backward --cuda-graph row on
    the H200, 2026-12-03)."""

    def __init__(self, op, call, values: dict):
        self.op, self.call, self.values = op, call, values
        self.inputs = requiring_grad(op, values)
        self.first_outputs = call()
        self.output_grads = output_gradients(self.first_outputs)

    def disagreement(self) -> str | None:
        """gradient_disagreement: None when the gradients of the first forward match the
        baseline's (or the op has no baseline to check against); else which one differs and how."""
        formula = self.op.baseline or self.op.reference
        first, self.first_outputs = self.first_outputs, None
        if not formula or first is None:
            return None
        ours = gradients(self.op, first, self.output_grads, self.inputs)
        baseline = baseline_outputs(self.op, self.values, len(first))
        theirs = gradients(self.op, baseline, self.output_grads, self.inputs)
        for name, a, b in zip(self.inputs, ours, theirs):
            wrong = normwise_disagreement(a, b)
            if wrong:
                return f"the gradient of {name} differs from the baseline's ({formula}): {wrong}"
        return None

    def step(self) -> None:
        """One timed sample: a forward and its backward."""
        self.first_outputs = None
        gradients(self.op, self.call(), self.output_grads, self.inputs)
