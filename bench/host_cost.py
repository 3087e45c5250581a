"""Host cost of calling each registry op from Python, on its first registry sample (small
tensors: the kernels take next to nothing, so the figure is what the Python and C++ layers
cost), beside the yardstick of a generated aten binding, `torch.add` on the same device.

    python bench/host_cost.py --device cuda [--ops add,rms_norm]

Rows, per op the device's plugin implements:
  torch.ops.backplane.<op>   the call as users write it (through backplane.fast_call)
  (torch.ops' own path)      the same op through torch.ops' generic argument parsing
  torch.add on [sizes]       the yardstick on the op's first tensor argument
  fwd+bwd                    forward and backward through autograd, ops with `backward:`
Microseconds per call, the best of 5 runs of 2000 calls, each run ending in a device
synchronize. Ops come from the registry; only the yardstick is named here.
"""
from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

import torch
from torch._ops import OpOverloadPacket

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import backplane  # noqa: E402


def host_us(fn, device, calls=2000, runs=5):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(100):
        fn()
    sync()
    best = float("inf")
    for _ in range(runs):
        begin = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - begin) / calls)
    return best * 1e6


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
    args = parser.parse_args(argv)
    loaded = backplane.load(args.device)[0]
    wanted = [n for n in args.ops.split(",") if n]
    unknown = set(wanted) - {op.name for op in backplane.ops()}
    if unknown:
        parser.error(f"unknown ops {sorted(unknown)}; the registry has {[op.name for op in backplane.ops()]}")
    width = 52
    print(f"host cost per call on {args.device}, torch {torch.__version__}, "
          f"fast call {backplane.info()['fast_call']}")
    a, b = torch.randn(4, device=args.device), torch.randn(4, device=args.device)
    ga, gb = a.detach().requires_grad_(), b.detach().requires_grad_()
    yardstick = [("torch.add [4] (a generated aten binding)", partial(torch.add, a, b)),
                 ("  torch.ops.aten.add.Tensor [4]", partial(torch.ops.aten.add.Tensor, a, b)),
                 ("  fwd+bwd", lambda: torch.autograd.grad(torch.add(ga, gb), (ga, gb), a))]
    for name, fn in yardstick:
        print(f"{name:<{width}} {host_us(fn, args.device):8.2f} us")
    for op in backplane.ops():
        if (wanted and op.name not in wanted) or op.name not in loaded.ops or not op.samples:
            continue
        for name, fn in op_rows(op, args.device):
            print(f"{name:<{width}} {host_us(fn, args.device):8.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
