"""Times a Python step as the engine times its rows (bench/workload_timing.cpp): samples
of a batch of calls lasting about 1 ms, taken until their spread is on target, between a
minimum and a maximum time (bench/adaptive_stop.h, whose rule and defaults these are).
The row's time is the samples' median per call.
  cpu: wall clock around each batch.
  cuda: device time between CUDA events around each batch, one untimed call queued ahead
        so the launch latency after the previous wait is not counted; with cuda_graph the
        batch is recorded once as a CUDA graph and its replays are timed, each queued
        before the previous one is waited for (as bench/cuda_graph_batch.cpp).
Other devices are refused: the engine's device-generic events have no Python equivalent."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from statistics import median

import torch

_WARMUP_CALLS = 3
_TARGET_BATCH_SECONDS = 1e-3
_MAX_BATCH = 4096


@dataclass(frozen=True)
class StopRule:
    min_seconds: float = 0.05
    max_seconds: float = 0.5
    target_spread: float = 0.02
    min_samples: int = 5


def relative_spread(samples) -> float:
    """Half the interquartile range over the median (linear quantiles, as adaptive_stop.h);
    0 for fewer than two samples."""
    if len(samples) < 2:
        return 0.0
    s = sorted(samples)

    def quantile(q):
        at = q * (len(s) - 1)
        lo = int(at)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (at - lo) * (s[hi] - s[lo])

    mid = quantile(0.5)
    return (quantile(0.75) - quantile(0.25)) / (2 * mid) if mid > 0 else 0.0


def should_stop(samples, elapsed: float, rule: StopRule) -> bool:
    if not samples:
        return False
    if elapsed >= rule.max_seconds:
        return True
    if elapsed < rule.min_seconds or len(samples) < rule.min_samples:
        return False
    return relative_spread(samples) <= rule.target_spread


@dataclass(frozen=True)
class Sampled:
    """One repetition: the median seconds per call and the counters the engine writes."""
    seconds: float
    spread: float
    samples: int
    sampled_seconds: float
    calls_per_batch: int


def batch_for(per_call: float) -> int:
    """Calls per sample so that one sample lasts about 1 ms."""
    return max(1, min(_MAX_BATCH, math.ceil(_TARGET_BATCH_SECONDS / max(per_call, 1e-9))))


def sample_until_stable(sample, batch: int, rule: StopRule) -> Sampled:
    """Takes samples (`sample()`: seconds for `batch` calls) until the rule says enough."""
    per_call, elapsed, start = [], 0.0, time.perf_counter()
    while not should_stop(per_call, elapsed, rule):
        per_call.append(sample() / batch)
        elapsed = time.perf_counter() - start
    return Sampled(median(per_call), relative_spread(per_call), len(per_call), elapsed, batch)


def _wall_seconds(step, calls: int) -> float:
    begin = time.perf_counter()
    for _ in range(calls):
        step()
    return time.perf_counter() - begin


class _CudaEvents:
    def __init__(self):
        self.start = torch.cuda.Event(enable_timing=True)
        self.stop = torch.cuda.Event(enable_timing=True)

    def seconds(self) -> float:
        self.stop.synchronize()
        return self.start.elapsed_time(self.stop) * 1e-3  # elapsed_time is in milliseconds


def _cuda_batch_seconds(step, calls: int, events: _CudaEvents) -> float:
    step()  # untimed: keeps the device busy while the timed calls are queued
    events.start.record()
    for _ in range(calls):
        step()
    events.stop.record()
    return events.seconds()


class _GraphReplays:
    """A batch of calls recorded as one CUDA graph; replay_seconds() times one replay,
    queuing the next before it waits, so no host latency falls inside an interval."""

    def __init__(self, step, calls: int):
        torch.cuda.synchronize()
        self.stream = torch.cuda.Stream()
        with torch.cuda.stream(self.stream):
            for _ in range(2):  # state a library makes per stream must not first be made in the capture
                step()
        self.stream.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=self.stream):
            for _ in range(calls):
                step()
        self.events = (_CudaEvents(), _CudaEvents())
        self.next = 0
        with torch.cuda.stream(self.stream):
            self.graph.replay()  # the first replay uploads the graph: not timed
            self._queue(self.next)

    def _queue(self, slot: int) -> None:
        events = self.events[slot]
        events.start.record(self.stream)
        self.graph.replay()
        events.stop.record(self.stream)

    def replay_seconds(self) -> float:
        current, self.next = self.next, self.next ^ 1
        with torch.cuda.stream(self.stream):
            self._queue(self.next)
        return self.events[current].seconds()

    def close(self) -> None:
        self.stream.synchronize()  # the replay left in flight writes into tensors about to be freed


def time_step(step, device: torch.device, rule: StopRule, *, repetitions: int = 1,
              cuda_graph: bool = False) -> list[Sampled]:
    """`repetitions` adaptive runs of `step` on `device`, with the calls per batch chosen
    once, on the first, and kept for the others (so they time the same thing)."""
    for _ in range(_WARMUP_CALLS):
        step()
    if device.type == "cpu":
        batch = batch_for(_wall_seconds(step, 1))
        return [sample_until_stable(lambda: _wall_seconds(step, batch), batch, rule) for _ in range(repetitions)]
    if device.type != "cuda":
        raise ValueError(f"torch.compile rows are timed on cpu or cuda, not {device.type}")
    with torch.cuda.device(device):
        events = _CudaEvents()
        batch = batch_for(_cuda_batch_seconds(step, 16, events) / 16)
        if not cuda_graph:
            return [sample_until_stable(lambda: _cuda_batch_seconds(step, batch, events), batch, rule)
                    for _ in range(repetitions)]
        replays = _GraphReplays(step, batch)
        try:
            return [sample_until_stable(replays.replay_seconds, batch, rule) for _ in range(repetitions)]
        finally:
            replays.close()


def stop_rule(min_time: float | None = None, max_time: float | None = None) -> StopRule:
    """The rule for --min-time/--max-time as the engine reads them: an unset maximum is at
    least the minimum; a maximum below the minimum is refused (ValueError)."""
    default = StopRule()
    low = min_time if min_time is not None else default.min_seconds
    high = max_time if max_time is not None else max(default.max_seconds, low)
    if high < low:
        raise ValueError(f"--max-time: expected at least --min-time ({low:g} s), found {high:g}")
    return StopRule(min_seconds=low, max_seconds=high)
