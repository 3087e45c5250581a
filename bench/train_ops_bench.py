"""Forward + backward of every registry op with a `backward:`, side by side in one process:
the Backplane op (its registry backward), PyTorch's side as the registry states it (the op's
`baseline:`, PyTorch's fused op, where it has one, e.g. aten::rms_norm; its `reference:`,
e.g. the composite formula) and torch.compile of the reference, with the device's copy_
bandwidth measured in the same run. Ops, shapes and PyTorch's side all come from the
registry: a new op with a `backward:` and `bench:` presets is timed with no code here.

    python bench/train_ops_bench.py --device cuda [--ops rms_norm,softmax] [--shapes NAME,...|all]
        [--dtypes float32,bfloat16] [--json out.json] [--profile] [--cuda-graph [--graph-calls N]]
        [--forward-only] [--skip-compile]

Before timing, every variant's output and gradients (for a random output gradient) are
checked against Backplane's, normwise (wrong results, not rounding); a row that disagrees is
reported, not timed, and the exit status is 1.

Shapes: the op's `bench:` presets, each in its `layout:` (the conformance suite's views:
transposed, strided, offset, expanded, permuted); by default the largest contiguous one of each op
(--shapes all: every one; or preset names). --profile also prints, per row, the device
kernels one forward+backward of the Backplane op runs and their times (torch.profiler).

GB/s (10^9 bytes) counts the least each pass must move: the forward reads every Tensor
argument and writes the output; the backward reads the output's gradient and the tensors
its `backward:` formulas name (`result`: the output) and writes one gradient per
differentiable argument, except a gradient that is `grad` itself, which moves nothing
(rms_norm: 5 tensors of x's size and 3 of the weight's; silu_mul 8; rotary 4, and the cos
and sin caches 4 times; softmax 5; add 5; identity_conv 2). These are the least the
registry's formulas must move: PyTorch's add skips the multiply by alpha = 1.
--forward-only times the forward alone.
Times: CUDA events around a batch of 10 calls (the CPU: wall clock), after a warm-up; each
variant's median over 15 rounds in which the variants take their batches in turn, so a
drift of the device's speed falls on all of them alike.

--cuda-graph replays each variant's step from a CUDA graph (captured after a warm-up on a
side stream): one launch a step, so the time is the device's and not the host's. Without
it a step is as slow as its Python and autograd calls where those take longer than the
kernels (a forward+backward of torch.add on tiny tensors is host-bound). --graph-calls N
puts N steps in each graph: a step of a few microseconds is then not timed with the gap
between two graph launches.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Callable, NamedTuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import backplane  # noqa: E402
from backplane.formula import Formula  # noqa: E402
from device_timer import device_ms, graphed, interleaved_device_ms  # noqa: E402  (bench/ is on sys.path when run as a script)


def chosen_presets(op, shapes: str):
    """The op's bench presets that `shapes` selects ("" : the largest contiguous one)."""
    presets = list(op.bench)

    def elements(preset):
        total = 0
        for name, sizes in preset["args"].items():
            if name in op.tensor_args:
                n = 1
                for s in sizes:
                    n *= s
                total += n
        return total

    if shapes == "all":
        return presets
    if shapes:
        return [p for p in presets if p["name"] in shapes.split(",")]
    contiguous = [p for p in presets if not p.get("layout")]
    return [max(contiguous, key=elements)] if contiguous else []


class _Layout(NamedTuple):
    least_dims: int  # dimensions the view needs
    base_sizes: Callable[[list], list]  # the base's sizes, for the view's sizes
    view: Callable[[torch.Tensor, list], torch.Tensor]  # (base, sizes) -> the view


# As the conformance suite builds its inputs (core/src/conformance/inputs.cpp).
_LAYOUTS = {
    None: _Layout(0, lambda s: s, lambda base, s: base),
    "transposed": _Layout(2, lambda s: s[:-2] + s[-1:] + s[-2:-1], lambda base, s: base.transpose(-1, -2)),
    "strided": _Layout(1, lambda s: s[:-1] + [2 * s[-1]], lambda base, s: base[..., ::2]),
    "offset": _Layout(0, lambda s: [math.prod(s) + 5], lambda base, s: base[5:].view(s)),
    "expanded": _Layout(1, lambda s: [1] + s[1:], lambda base, s: base.expand(s)),
    "permuted": _Layout(3, lambda s: s[::-1], lambda base, s: base.permute(*reversed(range(len(s))))),
}


def laid_out(sizes, layout, generator, device, dtype, requires_grad) -> torch.Tensor:
    """N(0, 1) values of `sizes` as a view in a preset's `layout`, built as the conformance
    suite builds its inputs: transposed (the last two dimensions swapped), strided (every
    other element of a row twice as long), offset (5 elements into a flat buffer), expanded
    (one row, expanded), permuted (a base of the sizes reversed, its dimensions permuted
    back). The view requires grad through its base; gradients are taken with respect to the
    view."""
    sizes = list(sizes)
    if layout not in _LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(k for k in _LAYOUTS if k)}")
    spec = _LAYOUTS[layout]
    if len(sizes) < spec.least_dims:
        raise ValueError(f"{layout} layout does not fit {len(sizes)} dimensions")
    base = torch.randn(spec.base_sizes(sizes), generator=generator).to(device=device, dtype=dtype)
    base.requires_grad_(requires_grad)
    return spec.view(base, sizes)


def pass_bytes(op, values: dict, output) -> tuple[int, int]:
    """The least the forward and the backward must move, in bytes, for the op's registry
    formulas: the forward reads every Tensor argument and writes the output; the backward
    reads the tensors its formulas name (`grad` and `result` are the output's size) and
    writes each differentiable argument's gradient. A gradient that is `grad` itself moves
    nothing (no copy is made), unless it must be summed to a smaller input. A read moves
    each distinct element once (an expanded view: its one row); a write, every element."""
    def nbytes(t):
        return t.numel() * t.element_size()

    def read_bytes(t):
        distinct = math.prod(size for size, stride in zip(t.shape, t.stride()) if stride != 0)
        return distinct * t.element_size() if t.numel() else 0

    forward = sum(read_bytes(values[n]) for n in op.tensor_args) + nbytes(output)
    reads, backward = set(), 0
    for arg in op.differentiable:
        formula = op.backward[arg]
        if formula.strip() == "grad":
            if values[arg].shape != output.shape:
                reads.add("grad")
                backward += nbytes(values[arg])  # the sum to the input's size
            continue
        reads |= Formula.parse(formula).names()
        backward += nbytes(values[arg])
    backward += sum(nbytes(output) for n in ("grad", "result") if n in reads)
    backward += sum(read_bytes(values[n]) for n in op.tensor_args if n in reads)
    return forward, backward


def inputs_for(op, preset, device, dtype, generator) -> dict:
    """The op's argument values for a bench preset: N(0, 1) tensors (requiring grad where
    the op is differentiable in them) and the schema's defaults."""
    schema = backplane.torch_op(op.name).default._schema
    values = {a.name: a.default_value for a in schema.arguments if a.has_default_value()}
    for name, given in preset["args"].items():
        if name in op.tensor_args:
            given = laid_out(given, preset.get("layout"), generator, device, dtype, name in op.differentiable)
        values[name] = given
    return values


def call_args(schema, values: dict) -> tuple[list, dict]:
    """The positional and keyword-only arguments of a call of the op, from `values`."""
    return ([values[a.name] for a in schema.arguments if not a.kwarg_only],
            {a.name: values[a.name] for a in schema.arguments if a.kwarg_only})


def workloads(device, dtype, ops: str, shapes: str):
    """(op, preset, bytes moved forward, backward, inputs needing grad, {variant: forward fn})
    for every registry op with a backward that this device's backend implements in dtype."""
    g = torch.Generator(device="cpu").manual_seed(0)
    dtype_name = str(dtype).removeprefix("torch.")
    for op in backplane.ops():
        if not op.differentiable or (ops and op.name not in ops.split(",")):
            continue
        if dtype_name not in op.backends.get(device, ()):
            print(f"{op.name}: not implemented on {device} in {dtype_name}, skipped")
            continue
        if not op.reference:
            print(f"{op.name}: no reference: in the registry (nothing of PyTorch's to time beside it), skipped")
            continue
        presets = chosen_presets(op, shapes)
        if not presets:
            print(f"{op.name}: no bench: preset{' named ' + shapes if shapes else ''}, skipped")
            continue
        packet = backplane.torch_op(op.name)
        schema = packet.default._schema
        reference = Formula.parse(op.reference)
        baseline = Formula.parse(op.baseline) if op.baseline else None
        for preset in presets:
            values = inputs_for(op, preset, device, dtype, g)
            args, kwargs = call_args(schema, values)
            forward, backward = pass_bytes(op, values, packet(*args, **kwargs))
            variants = {"backplane": lambda packet=packet, args=args, kwargs=kwargs: packet(*args, **kwargs)}
            if baseline:
                variants["baseline"] = lambda f=baseline, v=values: f(**v)
            variants["reference"] = lambda f=reference, v=values: f(**v)
            inputs = tuple(values[n] for n in op.differentiable)
            yield op.name, preset["name"], forward, backward, inputs, variants


def disagreements(variants, inputs) -> str:
    """"" when every variant's output and gradients match Backplane's, else what differs: a
    wrong kernel (or a wrong formula evaluation) is reported, not timed. The test is
    normwise, max |difference| <= tol * max |backplane's| (tol 1e-4 in float32 and wider,
    1e-2 in 16-bit types): it catches wrong results, not rounding, which in a gradient
    summed over thousands of rows of a 16-bit type is large next to its small elements."""
    results, grad = {}, None
    for name, fn in variants.items():
        out = fn()
        if grad is None:  # random: a gradient of ones hides softmax's (its rows sum to 1)
            grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out)
        results[name] = [out, *torch.autograd.grad(out, inputs, grad)]
    for name, got in results.items():
        for what, a, b in zip(["output", *(f"gradient {i}" for i in range(len(inputs)))], results["backplane"], got):
            tol = 1e-4 if a.dtype in (torch.float32, torch.float64) else 1e-2
            scale = a.detach().double().abs().max().item() if a.numel() else 0.0
            diff = (b.detach().double() - a.detach().double()).abs().max().item() if a.numel() else 0.0
            if b.shape != a.shape or not diff <= tol * max(scale, 1.0):
                return (f"{name}'s {what} differs from backplane's: max |difference| {diff:.3g} against "
                        f"max |backplane's| {scale:.3g} (tolerance {tol:g} of it)")
    return ""


def median_us(fn, device):
    """Median microseconds per call: device_timer.py (CUDA events), 10 calls a batch."""
    return device_ms(fn, device, reps=10, rounds=7) * 1e3


def interleaved_median_us(fns, device):
    """Each variant's median microseconds per call, the variants timed in turn each round
    (device_timer.py), 10 calls a batch."""
    return {name: ms * 1e3 for name, ms in interleaved_device_ms(fns, device, reps=10, rounds=15).items()}


def fwd_bwd(forward, inputs):
    out = forward()
    grad = torch.ones_like(out)

    def step():
        torch.autograd.grad(forward(), inputs, grad)
    return step


def profile_table(step, device) -> str:
    """The device kernels of one call of `step` (after a warm-up), with their times."""
    from torch.profiler import ProfilerActivity, profile

    step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        step()
        if device == "cuda":
            torch.cuda.synchronize()
    sort = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    return prof.key_averages().table(sort_by=sort, row_limit=8, max_name_column_width=70)


def copy_gbps(device, dtype):
    src = torch.empty(256 * 2**20 // torch.tensor([], dtype=dtype).element_size(), dtype=dtype, device=device)
    dst = torch.empty_like(src)
    us = median_us(lambda: dst.copy_(src), device)
    return 2 * src.numel() * src.element_size() / us / 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--shapes", default="", help="bench presets by name, or all (default: each op's largest)")
    parser.add_argument("--json")
    parser.add_argument("--profile", action="store_true", help="print each Backplane op's kernels (torch.profiler)")
    parser.add_argument("--forward-only", action="store_true", help="time the forward pass alone")
    parser.add_argument("--ops", default="", help="these ops only (default: all)")
    parser.add_argument("--skip-compile", action="store_true",
                        help="leave torch.compile out (its compile time dominates a short run: A/B runs of a kernel)")
    parser.add_argument("--cuda-graph", action="store_true", help="time replays of a CUDA graph of each step")
    parser.add_argument("--graph-calls", type=int, default=1,
                        help="with --cuda-graph: calls of the step in each graph (times are per call). Kernels "
                             "of a few microseconds need several, or the gap between graph launches counts")
    args = parser.parse_args(argv)
    if args.cuda_graph and args.device != "cuda":
        parser.error("--cuda-graph needs --device cuda")
    if args.graph_calls < 1 or (args.graph_calls > 1 and not args.cuda_graph):
        parser.error(f"--graph-calls takes a count of at least 1, with --cuda-graph (got {args.graph_calls})")
    if args.shapes and args.shapes != "all":
        known = {p["name"] for op in backplane.ops() for p in op.bench}
        unknown = sorted(set(args.shapes.split(",")) - known)
        if unknown:
            parser.error(f"no bench: preset named {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    backplane.load(args.device)
    rows, to_profile, failures = [], [], 0
    print(f"{torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}, torch {torch.__version__}")
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        copy = copy_gbps(args.device, dtype)
        print(f"\n{dtype_name}: copy_ {copy:.0f} GB/s")
        print(f"{'op':<14} {'shape':<22} {'variant':<14} {'fwd us' if args.forward_only else 'fwd+bwd us':>11} {'GB/s':>7} {'% copy':>7}  speedup over the best PyTorch"
              + ("  (CUDA graph replays)" if args.cuda_graph else ""))
        for op, shape, forward_bytes, backward_bytes, inputs, variants in workloads(args.device, dtype, args.ops, args.shapes):
            # fullgraph: a graph break inside the formula's evaluation would time eager code
            # under the name of torch.compile; it fails here instead.
            if not args.skip_compile:
                variants["torch.compile"] = torch.compile(variants["reference"], fullgraph=True)
            wrong = disagreements(variants, inputs)
            if wrong:
                print(f"{op:<14} {shape:<22} NOT TIMED: {wrong}")
                failures += 1
                continue
            if args.forward_only:
                nbytes = forward_bytes
                steps = dict(variants)
            else:
                nbytes = forward_bytes + backward_bytes
                steps = {name: fwd_bwd(fn, inputs) for name, fn in variants.items()}
            calls = args.graph_calls if args.cuda_graph else 1
            timed = {name: graphed(step, calls) for name, step in steps.items()} if args.cuda_graph else steps
            times = {name: us / calls for name, us in interleaved_median_us(timed, args.device).items()}
            if args.profile:  # after every timing: the profiler slows the launches that follow it
                to_profile.append((f"{op} {shape} {dtype_name}", steps["backplane"]))
            best_torch = min(t for name, t in times.items() if name != "backplane")
            for name, us in times.items():
                gbps = nbytes / us / 1e3
                speedup = f"{best_torch / us:.2f}x" if name == "backplane" else ""
                print(f"{op:<14} {shape:<22} {name:<14} {us:>11.1f} {gbps:>7.0f} {100 * gbps / copy:>6.0f}%  {speedup}")
                rows.append({"op": op, "shape": shape, "dtype": dtype_name, "variant": name, "us": us,
                             "gbps": gbps, "copy_gbps": copy, "passes": "forward" if args.forward_only else "forward+backward",
                             "cuda_graph": args.cuda_graph, "graph_calls": calls})
            torch._dynamo.reset()
    for what, step in to_profile:
        print(f"\n{what}, Backplane, one {'forward' if args.forward_only else 'forward+backward'}:\n"
              f"{profile_table(step, args.device)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"torch": torch.__version__, "rows": rows}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
