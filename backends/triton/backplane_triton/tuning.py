"""Launch configurations chosen per shape: measured once on the GPU, then cached.

A kernel module lists its candidate configurations for a call, best guess first, and
runs the one `pick` returns. Candidates are timed the first time a key is seen, and the
fastest is kept for the process: on CUDA replayed from a CUDA graph of _GRAPH_CALLS
launches (the GPU's time alone, as `backplane bench --cuda-graph` and compiled or captured
models see it), elsewhere by triton.testing.do_bench. The first candidate is used without
timing:
- under TRITON_INTERPRET=1 (tests on the CPU: one configuration, fast),
- where BACKPLANE_TRITON_AUTOTUNE=0 (no timing at first calls; reproducible launches),
- while the current stream is capturing a CUDA graph (nothing may synchronize then;
  the key stays unchosen, so a later eager call still measures);
- while the call is traced into a graph (launch.py: fake tensors, nothing to time); a
  configuration an eager call of the shape chose is taken.
Timing re-runs the launch, which only writes the op's outputs and workspaces, so it is
safe for these ops (none reads what it writes).
"""
import math
import os

import torch

from .launch import tracing

_chosen = {}
_ROUNDS = 2
_GRAPH_CALLS = 10  # launches a graph holds: a 5 us kernel's replay is then 50 us, well above the timer's noise
_REPLAYS = 10  # replays a round, their median the round's figure


def interpreting():
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def autotuning():
    return os.environ.get("BACKPLANE_TRITON_AUTOTUNE", "1") != "0" and not interpreting()


def settled(key, candidates):
    """True when pick(key, candidates, ...) gives the same answer from now on."""
    return len(candidates) == 1 or not autotuning() or key in _chosen


def pick(key, candidates, launch):
    """The configuration to run for `key`: candidates[0] unless autotuning, else the
    fastest candidate of `launch(candidate)`. A candidate that fails to compile or run
    (out of registers or shared memory) is skipped; if all fail, the first's error is raised."""
    if len(candidates) == 1 or not autotuning():
        return candidates[0]
    if key in _chosen:
        return _chosen[key]
    if tracing():  # fake tensors: nothing to time; an eager call of this shape would have chosen
        return candidates[0]
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        return candidates[0]
    # Each candidate's median over its samples, in _ROUNDS rounds taken in turn, and its
    # best round kept: one round's mean, taken in list order, picked a configuration well
    # behind the fastest (rms_norm_backward, bfloat16 8192x4096, H200: bench/results/
    # triton), an outlier or a clock still rising skewing a single figure. By do_bench's
    # figures, which hold the host's launch time and a flushed L2, the medians still picked
    # a float32 configuration 5% behind the fastest replayed there: graphs now decide on CUDA.
    best_ms, first_error, failed = {}, None, set()
    for _ in range(_ROUNDS):
        for candidate in candidates:
            if candidate in failed:
                continue
            try:
                ms = _time_ms(lambda: launch(candidate))
            except Exception as error:  # noqa: BLE001 - a candidate the device cannot run
                first_error = first_error or error
                failed.add(candidate)
                continue
            best_ms[candidate] = min(ms, best_ms.get(candidate, math.inf))
    if not best_ms:
        raise first_error
    best = min(best_ms, key=best_ms.get)
    _chosen[key] = best
    return best


def _time_ms(fn) -> float:
    """Milliseconds one call of fn takes on the device: on CUDA the median of _REPLAYS
    replays of a CUDA graph of _GRAPH_CALLS calls (backplane.bench.timing's graph timer, the
    one the experiments use; imported at the first timing only), else triton.testing.do_bench's
    median."""
    if not torch.cuda.is_available() or torch.version.hip is not None:
        import triton.testing

        return triton.testing.do_bench(fn, warmup=5, rep=25, return_mode="median")
    from backplane.bench.timing import device_ms, graphed

    return device_ms(graphed(fn, _GRAPH_CALLS), "cuda", calls=1, rounds=_REPLAYS) / _GRAPH_CALLS
