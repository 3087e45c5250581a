"""DDP on npu, two processes: step time with the collectives overlapped (the plugin's
c10d backend, collectives/) against the same collectives made synchronous
(BACKPLANE_NPU_SYNC_COLLECTIVES=1: the host waits for each bucket's all-reduce), and how
much of the all-reduce time a profile shows beside compute kernels.

    python backends/npu/collectives/ddp_overlap_bench.py --rounds 3 [--trace DIR]

Each round runs both modes, each in two fresh processes (mp.spawn, a file store), and
prints one JSON line per mode and round: median step time over --steps timed steps
(after --warmup), and from a profiled step, the all-reduce kernels' total time and the
part of it during which a compute kernel ran on the same device. The project's own
script: not copied into scaffolds.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

for _name, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                      ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_name, _value)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

WORLD = 2


def _model(layers: int, width: int, dev):
    torch.manual_seed(0)
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    return torch.nn.Sequential(*blocks).to(dev)


def _overlap(prof) -> tuple[float, float]:
    """(all-reduce kernel ms, ms of it with a compute kernel running) on this rank's device."""
    from torch.autograd import DeviceType

    kernels = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    comm = [(e.time_range.start, e.time_range.end) for e in kernels if e.name.startswith("npu_gloo:")]
    compute = sorted((e.time_range.start, e.time_range.end) for e in kernels if not e.name.startswith("npu_gloo:"))
    total = sum(end - start for start, end in comm)
    covered = 0
    for start, end in comm:
        for c_start, c_end in compute:
            covered += max(0, min(end, c_end) - max(start, c_start))
    return total / 1000, covered / 1000


def _rank(rank: int, args, store_dir: str, out_dir: str) -> None:
    import warnings

    warnings.filterwarnings("ignore", message="backplane npu: .* has no npu kernel")
    import backplane
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile

    backplane.load("npu")
    torch.npu.set_device(rank)
    dist.init_process_group(init_method=f"file://{store_dir}/store", rank=rank, world_size=WORLD)
    dev = torch.device("npu", rank)
    model = DistributedDataParallel(_model(args.layers, args.width, dev), device_ids=[rank],
                                    bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, args.width, generator=g).to(dev)

    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        torch.npu.synchronize(rank)

    times = []
    for i in range(args.warmup + args.steps):
        dist.barrier()
        start = time.perf_counter()
        step()
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    dist.barrier()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        step()
    comm_ms, overlapped_ms = _overlap(prof)
    if args.trace and rank == 0:
        prof.export_chrome_trace(str(Path(args.trace) / f"ddp_{os.environ['BACKPLANE_NPU_SYNC_COLLECTIVES']}.json"))
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(
        {"step_ms": [t * 1000 for t in times], "allreduce_ms": comm_ms, "overlapped_ms": overlapped_ms}))
    dist.barrier()
    dist.destroy_process_group()


def run_mode(synchronous: bool, args) -> dict:
    os.environ["BACKPLANE_NPU_SYNC_COLLECTIVES"] = "1" if synchronous else "0"  # read by each rank's group
    with tempfile.TemporaryDirectory() as store_dir, tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_rank, args=(args, store_dir, out_dir), nprocs=WORLD)
        ranks = [json.loads(Path(out_dir, f"rank{r}.json").read_text()) for r in range(WORLD)]
    # A step ends when the slower rank's does.
    steps = [max(pair) for pair in zip(*(r["step_ms"] for r in ranks))]
    return {"mode": "synchronous" if synchronous else "overlapped", "median_step_ms": round(statistics.median(steps), 2),
            "steps_ms": [round(s, 2) for s in steps], "rank0_allreduce_ms": round(ranks[0]["allreduce_ms"], 2),
            "rank0_allreduce_beside_compute_ms": round(ranks[0]["overlapped_ms"], 2)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--bucket-mb", type=float, default=1.0, help="DDP's bucket_cap_mb: several buckets per backward")
    p.add_argument("--trace", help="folder for rank 0's Chrome trace of a profiled step, per mode")
    args = p.parse_args(argv)
    for _ in range(args.rounds):
        for synchronous in (False, True):
            print(json.dumps(run_mode(synchronous, args)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
