"""torch.compile on a device backend against the same model on the CPU, same machine, same run.

    python -m backplane.bench.compile_device [--device npu] [--steps 30] [--out bench/results/X.json]

For the decoder LM of models/train.py (Backplane ops, batch 32), on `--device` and on
cpu, each in processes of its own (a PrivateUse1 device becomes torch's accelerator):
- compile time: the first compiled training step (model and loss, forward and backward: Dynamo, AOT
  autograd, Inductor, the C++ compiler), with a cold Inductor cache (a new directory)
  and a warm one (a second process on the same directory);
- step time: the median of `--steps` training steps (forward with the loss, backward,
  gradients zeroed; no optimizer update, which is the same aten code either way),
  eager and compiled, each step ending with a synchronize of the device.
The emulated npu computes on the host's cores, so its compiled step and the CPU's run
the same generated C++; what differs is the queueing on the device's streams.
Runs from a checkout only: the model is models/train.py, which the package does not ship.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the checkout: python/backplane/bench/ -> root


def _child(device: str, steps: int) -> dict:
    import torch

    import backplane
    from models.train import DecoderLM, batch, loss_of

    backplane.load(device)
    sync = getattr(torch, device).synchronize if device != "cpu" else (lambda: None)
    model = DecoderLM(use_backplane=True).to(device)
    g = torch.Generator().manual_seed(0)
    tokens, targets = batch(32, g, device)

    def eager(tokens, targets):
        return loss_of(model, tokens, targets)

    def step(run):
        model.zero_grad(set_to_none=True)
        run(tokens, targets).backward()
        sync()

    compiled = torch.compile(eager)  # the model and its loss, forward and backward
    t0 = time.perf_counter()
    step(compiled)
    compile_s = time.perf_counter() - t0

    def median_ms(run):
        for _ in range(3):
            step(run)
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            step(run)
            times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times)

    return {"first_compiled_step_s": compile_s, "eager_step_ms": median_ms(eager),
            "compiled_step_ms": median_ms(compiled)}


def _run(device: str, cache: str, steps: int) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT / "python"), str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    child = [sys.executable, "-m", "backplane.bench.compile_device", "--child", device, "--steps", str(steps)]
    out = subprocess.run(child, env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{device}: the child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="npu")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--out", type=Path)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.steps)))
        return 0
    import torch

    results = {}
    for device in ("cpu", args.device):
        with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
            cold = _run(device, cache, args.steps)
            warm = _run(device, cache, args.steps)
        results[device] = {"compile_cold_s": cold["first_compiled_step_s"],
                           "compile_warm_s": warm["first_compiled_step_s"],
                           "eager_step_ms": warm["eager_step_ms"], "compiled_step_ms": warm["compiled_step_ms"]}
        r = results[device]
        print(f"{device:>5}: compile cold {r['compile_cold_s']:.1f} s, warm {r['compile_warm_s']:.1f} s; "
              f"step eager {r['eager_step_ms']:.2f} ms, compiled {r['compiled_step_ms']:.2f} ms", flush=True)
    dev, cpu = results[args.device], results["cpu"]
    ratios = {
        "compile_cold_vs_cpu": dev["compile_cold_s"] / cpu["compile_cold_s"],
        "compile_warm_vs_cpu": dev["compile_warm_s"] / cpu["compile_warm_s"],
        "compiled_vs_eager_step": dev["compiled_step_ms"] / dev["eager_step_ms"],
        "compiled_step_vs_cpu_compiled": dev["compiled_step_ms"] / cpu["compiled_step_ms"],
    }
    print("  ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    given = argv if argv is not None else sys.argv[1:]
    record = {"command": "python -m backplane.bench.compile_device " + " ".join(given),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": f"{platform.node()} ({os.cpu_count()} cores)", "torch": torch.__version__,
              "model": "models/train.py DecoderLM (Backplane ops) and its loss, batch 32, forward+backward",
              "results": results, "ratios": ratios}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
