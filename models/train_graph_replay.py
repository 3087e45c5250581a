"""Times models/train.py's decoder LM training step on npu, eager against replayed from
a device graph (torch.npu.NPUGraph), in one run, and checks that both give the same losses.

    python -m models.train_graph_replay --steps 30 --batch 32

Both take the same batches, from the same weights, with AdamW(capturable=True): its step
counter lives on the device, so a replay advances it (with the default, capturable=False,
the counter is a CPU number fixed at capture, and replays would reuse its bias
correction). Each side first runs 3 eager steps (optimizer state is made lazily and must
exist before capture); the graph side then captures one step, and each timed step copies
a fresh batch into the captured inputs and replays. A step's time is wall time to a
synchronize, the two sides alternating step by step; the median step is reported.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from models.train import DecoderLM, batch, loss_of

WARMUP = 3


def _step(model, opt, tokens, targets):
    opt.zero_grad(set_to_none=True)
    loss = loss_of(model, tokens, targets)
    loss.backward()
    opt.step()
    return loss


def _setup(lr):
    model = DecoderLM(use_backplane=True).to("npu")
    return model, torch.optim.AdamW(model.parameters(), lr=lr, capturable=True, foreach=False)


def run(steps=30, batch_size=32, lr=3e-3):
    """Returns (eager step times, replayed step times, eager losses, replayed losses): the
    two sides alternate step by step, so that a burst of load on a shared machine falls on
    both alike; each time runs to a synchronize."""
    import backplane

    backplane.load("npu")
    g = torch.Generator().manual_seed(1)
    batches = [batch(batch_size, g, "cpu") for _ in range(WARMUP + steps)]

    eager_model, eager_opt = _setup(lr)
    eager_losses = [_step(eager_model, eager_opt, t.to("npu"), y.to("npu")) for t, y in batches[:WARMUP]]

    model, opt = _setup(lr)
    side = torch.npu.Stream()  # warm up on the capture stream: autograd keeps the stream a leaf was seen on
    with torch.npu.stream(side):
        graph_losses = [_step(model, opt, t.to("npu"), y.to("npu")) for t, y in batches[:WARMUP]]
        static_tokens, static_targets = batches[0][0].to("npu"), batches[0][1].to("npu")
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph, stream=side):
        static_loss = _step(model, opt, static_tokens, static_targets)

    eager_times, replay_times = [], []
    for t, y in batches[WARMUP:]:
        torch.npu.synchronize()
        start = time.perf_counter()
        eager_losses.append(_step(eager_model, eager_opt, t.to("npu"), y.to("npu")))
        torch.npu.synchronize()
        eager_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        static_tokens.copy_(t)
        static_targets.copy_(y)
        graph.replay()
        graph_losses.append(static_loss.clone())
        torch.npu.synchronize()
        replay_times.append(time.perf_counter() - start)
    return eager_times, replay_times, [x.item() for x in eager_losses], [x.item() for x in graph_losses]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.train_graph_replay", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    args = p.parse_args(argv)
    eager_times, replay_times, eager_losses, graph_losses = run(args.steps, args.batch)
    eager, replayed = statistics.median(eager_times), statistics.median(replay_times)
    worst = max(abs(a - b) for a, b in zip(eager_losses, graph_losses))
    print(f"decoder LM training step on npu, batch {args.batch}, {args.steps} timed steps, median: eager "
          f"{eager * 1e3:.2f} ms, graph replay {replayed * 1e3:.2f} ms, {eager / replayed:.2f}x (means "
          f"{statistics.mean(eager_times) * 1e3:.2f} / {statistics.mean(replay_times) * 1e3:.2f} ms); loss "
          f"{eager_losses[0]:.4f} -> {eager_losses[-1]:.4f}, largest loss difference eager vs replay {worst:.3g}")
    return 0 if worst == 0.0 else 1


if __name__ == "__main__":
    sys.exit(main())
