"""Host cost of calling each registry op from Python, on its first registry sample (small
tensors: the kernels take next to nothing, so the figure is what the Python and C++ layers
cost), beside the yardstick of a generated aten binding, `torch.add` on the same device.

    python -m backplane.bench.host_cost --device cuda [--ops add,rms_norm] [--rounds 15]

Rows, per op the device's plugin implements:
  torch.ops.backplane.<op>   the call as users write it (through backplane.fast_call)
  (torch.ops' own path)      the same op through torch.ops' generic argument parsing
  torch.add on [sizes]       the yardstick on the op's first tensor argument
  fwd+bwd                    forward and backward through autograd, ops with `backward:`
Microseconds per call: the median over --rounds rounds of 1000 calls each, each round
ending in a device synchronize. An op's rows are timed in turn within every round, so a
drift of the machine's speed (other processes, clocks) falls on all of them alike; the
last column is the call's median over torch.add's. Ops come from the registry; only the
yardstick is named here.
"""
from __future__ import annotations

import argparse
import sys
from functools import partial

import torch
from torch._ops import OpOverloadPacket

import backplane
from backplane.bench.timing import interleaved_ms


def interleaved_us(rows, device, rounds, calls=1000):
    """Median microseconds per call of each (name, fn) row, the rows timed in turn each round."""
    medians = interleaved_ms({i: fn for i, (_, fn) in enumerate(rows)}, device, calls, rounds, warmup=100,
                             clock="host")
    return [medians[i] * 1e3 for i in range(len(rows))]


def print_rows(rows, device, rounds, yardstick_row=None, width=52):
    """Each row's median; the first row's also over the row at index yardstick_row."""
    medians = interleaved_us(rows, device, rounds)
    for i, ((name, _), us) in enumerate(zip(rows, medians)):
        ratio = f"  {us / medians[yardstick_row]:.2f}x torch.add" if i == 0 and yardstick_row is not None else ""
        print(f"{name:<{width}} {us:8.2f} us{ratio}")


OP_YARDSTICK_ROW = 2  # op_rows' torch.add row


def op_rows(op, device):
    packet = backplane.torch_op(op.name)
    args, kwargs = backplane.sample_call(op, device=device)
    label = f"{op.namespace}.{op.name.rpartition('::')[2]}"
    # functools.partial: the arguments are bound once, as a direct call passes them.
    first = next(a for a in args if isinstance(a, torch.Tensor))
    rows = [(f"torch.ops.{label} ({op.samples[0]['name']})", partial(packet, *args, **kwargs)),
            # torch's OpOverloadPacket.__call__, as the call ran before the fast call
            ("  (torch.ops' own path)", partial(OpOverloadPacket.__call__, packet, *args, **kwargs)),
            (f"  torch.add on {list(first.shape)}", partial(torch.add, first, first))]
    if op.differentiable:
        grad_args = [a.detach().requires_grad_(n in op.differentiable) if isinstance(a, torch.Tensor) else a
                     for a, n in zip(args, [a.name for a in packet.default._schema.arguments])]
        inputs = [a for a in grad_args if isinstance(a, torch.Tensor) and a.requires_grad]
        out = packet(*grad_args, **kwargs)
        first = out[0] if isinstance(out, tuple) else out
        grad = torch.ones_like(first)

        def fwd_bwd():
            result = packet(*grad_args, **kwargs)
            torch.autograd.grad(result[0] if isinstance(result, tuple) else result, inputs, grad)
        rows.append(("  fwd+bwd", fwd_bwd))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "npu"])
    parser.add_argument("--ops", default="", help="comma-separated registry ops (default: every op the plugin has)")
    parser.add_argument("--rounds", type=int, default=15, help="rounds of 1000 calls per row (default 15)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    loaded = backplane.load(args.device)[0]
    wanted = [n for n in args.ops.split(",") if n]
    unknown = set(wanted) - {op.name for op in backplane.ops()}
    if unknown:
        parser.error(f"unknown ops {sorted(unknown)}; the registry has {[op.name for op in backplane.ops()]}")
    print(f"host cost per call on {args.device}, torch {torch.__version__}, "
          f"fast call {backplane.info()['fast_call']}; median of {args.rounds} rounds")
    a, b = torch.randn(4, device=args.device), torch.randn(4, device=args.device)
    ga, gb = a.detach().requires_grad_(), b.detach().requires_grad_()
    yardstick = [("torch.add [4] (a generated aten binding)", partial(torch.add, a, b)),
                 ("  torch.ops.aten.add.Tensor [4]", partial(torch.ops.aten.add.Tensor, a, b)),
                 ("  fwd+bwd", lambda: torch.autograd.grad(torch.add(ga, gb), (ga, gb), a))]
    print_rows(yardstick, args.device, args.rounds)
    for op in backplane.ops():
        if (wanted and op.name not in wanted) or op.name not in loaded.ops or not op.samples:
            continue
        print_rows(op_rows(op, args.device), args.device, args.rounds, yardstick_row=OP_YARDSTICK_ROW)
    return 0


if __name__ == "__main__":
    sys.exit(main())
