"""The device timer the Python benchmarks share: CUDA events on a GPU, the wall clock
elsewhere (every npu and cpu op here returns with its work done or queued on a stream
the next call orders after, so the wall clock over a batch is the device's time)."""
from __future__ import annotations

import statistics
import time

import torch


def device_ms(fn, device, reps=50, rounds=7):
    """Median milliseconds per call of fn on device, over `rounds` batches of `reps` calls."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(rounds):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / reps)
        else:
            begin = time.perf_counter()
            for _ in range(reps):
                fn()
            times.append((time.perf_counter() - begin) * 1e3 / reps)
    return statistics.median(times)
