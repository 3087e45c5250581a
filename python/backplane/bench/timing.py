"""The Python side's one timer, for what the engine cannot time: torch.compile'd
references (compiled.py), the host cost of a call from Python (host_cost.py) and the
experiments/. Devices: cpu by the wall clock; cuda by CUDA events; with a CUDA graph, the
replays of one recorded batch.

Adaptive (time_step): as the engine times its rows (bench/workload_timing.cpp), samples of
a batch of calls lasting about 1 ms, taken until the engine's stop rule (native.py, owned by
bench/adaptive_stop.h) says enough; the row's time is the samples' median per call.
  cpu: wall clock around each batch.
  cuda: device time between CUDA events around each batch, one untimed call queued ahead
        so the launch latency after the previous wait is not counted; with cuda_graph the
        batch is recorded once as a CUDA graph and its replays are timed, each queued
        before the previous one is waited for (as bench/cuda_graph_batch.cpp).
  cuda with cold_l2 (--cold-l2): each sample one call (or one replay of a graph of one call)
        after an untimed write of twice the device's L2 cache, outside the events, as the
        engine's cold rows (bench/cold_cache.h). cpu: no effect (its caches are not flushed).
  Other devices are refused: the engine's device-generic events have no Python equivalent.
Several steps compared (time_steps): the same samples, one calls per batch for all, their
repetitions in turn.
Interleaved (interleaved_ms): fixed rounds of fixed batches, the variants timed in turn, for
comparisons within one process (a drift of the machine falls on every variant alike).
"""
from __future__ import annotations

import math
import statistics
import time
import warnings
from dataclasses import dataclass
from statistics import median

import torch

from .native import StopRule, default_stop_rule, relative_spread, should_stop

_WARMUP_CALLS = 3
_TARGET_BATCH_SECONDS = 1e-3
_MAX_BATCH = 4096


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


def l2_flush(device: torch.device):
    """A function writing twice `device`'s L2 cache on the current stream (--cold-l2), so
    that the next call finds none of its inputs there; it holds its buffer."""
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    if not l2 > 0:
        raise ValueError(f"--cold-l2: {device} reports no L2 cache size (found {l2!r})")
    buffer = torch.empty(2 * l2, dtype=torch.uint8, device=device)
    return buffer.zero_


def _cuda_cold_seconds(step, flush, events: _CudaEvents) -> float:
    flush()  # untimed; it keeps the device busy while the timed call is queued
    events.start.record()
    step()
    events.stop.record()
    return events.seconds()


_EMPTY_GRAPH = "The CUDA Graph is empty"


class NoDeviceWork(RuntimeError):
    """A CUDA-graph timing of a step that records no work: there is nothing to time."""


class _GraphReplays:
    """A batch of calls recorded as one CUDA graph; replay_seconds() times one replay,
    queuing the next before it waits, so no host latency falls inside an interval.
    before_each: run on the graph's stream ahead of each timed replay, outside its events
    (--cold-l2's flush). stream: the one to record and replay on (default: a new one);
    batches compared with each other share one, so that the replay each leaves queued runs
    before, never beside, the next one's. pool: the memory pool to record into (default: a
    private one); batches compared share one too (see time_steps)."""

    def __init__(self, step, calls: int, before_each=None, stream=None, pool=None):
        self.before_each = before_each
        torch.cuda.synchronize()
        self.stream = stream if stream is not None else torch.cuda.Stream()
        with torch.cuda.stream(self.stream):
            for _ in range(2):  # state a library makes per stream must not first be made in the capture
                step()
        self.stream.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with torch.cuda.graph(self.graph, stream=self.stream, pool=pool):
                for _ in range(calls):
                    step()
        for w in seen:  # torch's other warnings, as they were
            if _EMPTY_GRAPH not in str(w.message):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if any(_EMPTY_GRAPH in str(w.message) for w in seen):
            # A replay of nothing takes ~0.1 us: a figure that would read as a kernel's time.
            raise NoDeviceWork("the step launches no work on the GPU (its CUDA graph is empty: the op is a view, or "
                               "was compiled away), so a replay times nothing; time it without --cuda-graph")
        self.events = (_CudaEvents(), _CudaEvents())
        self.next = 0
        with torch.cuda.stream(self.stream):
            self.graph.replay()  # the first replay uploads the graph: not timed
            self._queue(self.next)

    def _queue(self, slot: int) -> None:
        events = self.events[slot]
        if self.before_each is not None:
            self.before_each()  # on self.stream: the callers queue inside torch.cuda.stream(self.stream)
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
              cuda_graph: bool = False, cold_l2: bool = False) -> list[Sampled]:
    """`repetitions` adaptive runs of `step` on `device`, with the calls per batch chosen
    once, on the first, and kept for the others (so they time the same thing). cold_l2:
    cuda samples of one call after an L2 flush (no effect on cpu)."""
    return time_steps({"step": step}, device, rule, repetitions=repetitions, cuda_graph=cuda_graph,
                      cold_l2=cold_l2)["step"]


def time_steps(steps: dict, device: torch.device, rule: StopRule, *, repetitions: int = 1,
               cuda_graph: bool = False, cold_l2: bool = False) -> dict[str, list[Sampled]]:
    """As time_step, for several steps compared with each other (name -> step): one calls
    per batch for all, chosen on the first step, and their repetitions taken in turn, the
    order reversed every other round, so a drift of the device's clocks or caches during
    the run falls on every step alike (a torch.compile row and the row it is read against,
    2-4 us replays that timed minutes apart differed by 10%)."""
    for step in steps.values():
        for _ in range(_WARMUP_CALLS):
            step()
    first = next(iter(steps.values()))  # the step the calls per batch are chosen on
    if device.type == "cpu":
        batch = batch_for(_wall_seconds(first, 1))
        samplers = {name: (lambda step=step: _wall_seconds(step, batch)) for name, step in steps.items()}
        return _in_turn(samplers, batch, rule, repetitions)
    if device.type != "cuda":
        raise ValueError(f"torch.compile rows are timed on cpu or cuda, not {device.type}")
    with torch.cuda.device(device):
        events = _CudaEvents()
        flush = l2_flush(device) if cold_l2 else None
        if cold_l2 and not cuda_graph:
            samplers = {name: (lambda step=step: _cuda_cold_seconds(step, flush, events)) for name, step in steps.items()}
            return _in_turn(samplers, 1, rule, repetitions)
        batch = 1 if cold_l2 else batch_for(_cuda_batch_seconds(first, 16, events) / 16)
        if not cuda_graph:
            samplers = {name: (lambda step=step: _cuda_batch_seconds(step, batch, events))
                        for name, step in steps.items()}
            return _in_turn(samplers, batch, rule, repetitions)
        replays, stream, pool = {}, torch.cuda.Stream(), shared_pool()
        try:
            for name, step in steps.items():
                replays[name] = _GraphReplays(step, batch, before_each=flush, stream=stream, pool=pool)
            return _in_turn({name: r.replay_seconds for name, r in replays.items()}, batch, rule, repetitions)
        finally:
            for r in replays.values():
                r.close()


def shared_pool():
    """The one memory pool the CUDA graphs of steps compared are recorded into. Each step's
    outputs and intermediates are freed within its capture, so the next capture is given the
    same blocks: steps running the same generated code then write the same addresses, one
    difference fewer between two rows compared (measured against pools of their own: no
    change beyond noise, bench/results/compile-selection/README.md). Safe because the
    graphs never run at once (one stream) and keep nothing across a replay."""
    return torch.cuda.graph_pool_handle()


def _in_turn(samplers: dict, batch: int, rule: StopRule, repetitions: int) -> dict[str, list[Sampled]]:
    """`repetitions` adaptive runs of each sampler, one of each in turn, reversed every other round."""
    timed = {name: [] for name in samplers}
    order = list(samplers.items())
    for r in range(repetitions):
        for name, sample in (order if r % 2 == 0 else order[::-1]):
            timed[name].append(sample_until_stable(sample, batch, rule))
    return timed


def stop_rule(min_time: float | None = None, max_time: float | None = None) -> StopRule:
    """The rule for --min-time/--max-time as the engine reads them: an unset maximum is at
    least the minimum; a maximum below the minimum is refused (ValueError)."""
    default = default_stop_rule()
    low = min_time if min_time is not None else default.min_seconds
    high = max_time if max_time is not None else max(default.max_seconds, low)
    if high < low:
        raise ValueError(f"--max-time: expected at least --min-time ({low:g} s), found {high:g}")
    return StopRule(low, high, default.target_spread, default.min_samples)


def _synchronizer(device: str):
    """What waits for `device`'s queued work: nothing on cpu (an op returns with its work
    done), the device module's synchronize elsewhere (npu, cuda: queued on a stream)."""
    if device == "cpu":
        return lambda: None
    return getattr(torch, torch.device(device).type).synchronize


def _batch_seconds(fn, device: str, calls: int, clock: str) -> float:
    """Seconds for `calls` calls of fn. clock "device": CUDA events on cuda, else the wall
    clock from a synchronize to a synchronize. clock "host": the wall clock, ending in a
    synchronize on cuda only, so its queue of launches cannot grow across batches (on npu
    a synchronize would count the kernels, which the emulated device runs on host cores)."""
    if clock == "device" and device == "cuda":
        events = _CudaEvents()
        events.start.record()
        for _ in range(calls):
            fn()
        events.stop.record()
        return events.seconds()
    if clock == "host":
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    else:
        sync = _synchronizer(device)
    if clock == "device":
        sync()  # work an earlier batch (another variant's) left queued is not this batch's
    begin = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return time.perf_counter() - begin


def interleaved_ms(fns, device: str, calls: int = 50, rounds: int = 7, warmup: int = 5,
                   clock: str = "device") -> dict:
    """Median milliseconds per call of each fn in the dict `fns` (name -> fn), over
    `rounds` rounds in which every fn times one batch of `calls` calls, in turn, the order
    reversed every other round, so the variants share whatever the device does during the
    run (its clocks, other work): a few percent that timing one after the other could put
    on one of them. clock: as _batch_seconds."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    if clock == "host" and device == "cuda":
        torch.cuda.synchronize()
    times = {name: [] for name in fns}
    order = list(fns.items())
    for r in range(rounds):
        for name, fn in (order if r % 2 == 0 else reversed(order)):
            times[name].append(_batch_seconds(fn, device, calls, clock) * 1e3 / calls)
    return {name: statistics.median(t) for name, t in times.items()}


def device_ms(fn, device: str, calls: int = 50, rounds: int = 7) -> float:
    """Median milliseconds per call of fn on device, over `rounds` batches of `calls` calls."""
    return interleaved_ms({"fn": fn}, device, calls, rounds)["fn"]


def graphed(step, calls: int = 1):
    """`calls` calls of `step` captured in one CUDA graph after a warm-up on a side stream;
    returns its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            step()
    return graph.replay
