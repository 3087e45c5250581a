"""The device timer the Python benchmarks share: CUDA events on a GPU, the wall clock
elsewhere, from a synchronize to a synchronize (an npu op returns with its work queued on
a stream; a cpu op with its work done). Also the CUDA graph capture they share (graphed)."""
from __future__ import annotations

import statistics
import time

import torch


def _batch_ms(fn, device, reps):
    """Milliseconds per call over one batch of `reps` calls."""
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / reps
    sync = (lambda: None) if device == "cpu" else getattr(torch, torch.device(device).type).synchronize
    sync()  # work an earlier batch (another variant's) left queued is not this batch's
    begin = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - begin) * 1e3 / reps


def interleaved_device_ms(fns, device, reps=50, rounds=7):
    """Median milliseconds per call of each fn in the dict `fns` (name -> fn), over
    `rounds` rounds in which every fn times one batch of `reps` calls, in turn, the
    order reversed every other round. Timed so, the variants share whatever the device
    does during the run (its clocks, other work): a few percent that timing one after
    the other could put on one of them."""
    for fn in fns.values():
        for _ in range(5):
            fn()
    times = {name: [] for name in fns}
    order = list(fns.items())
    for r in range(rounds):
        for name, fn in (order if r % 2 == 0 else reversed(order)):
            times[name].append(_batch_ms(fn, device, reps))
    return {name: statistics.median(t) for name, t in times.items()}


def graphed(step, calls=1):
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


def device_ms(fn, device, reps=50, rounds=7):
    """Median milliseconds per call of fn on device, over `rounds` batches of `reps` calls."""
    return interleaved_device_ms({"fn": fn}, device, reps, rounds)["fn"]
