"""Launch configurations chosen per shape: measured once on the GPU, then cached.

A kernel module lists its candidate configurations for a call, best guess first, and
runs the one `pick` returns. Candidates are timed (triton.testing.do_bench) the first
time a key is seen, and the fastest is kept for the process. The first candidate is
used without timing:
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
    import triton.testing

    # Each candidate's median over its samples, in _ROUNDS rounds taken in turn, and its
    # best round kept: one round's mean, taken in list order, picked a configuration well
    # behind the fastest (rms_norm_backward, bfloat16 8192x4096, H200: bench/results/
    # triton), an outlier or a clock still rising skewing a single figure.
    best_ms, first_error, failed = {}, None, set()
    for _ in range(_ROUNDS):
        for candidate in candidates:
            if candidate in failed:
                continue
            try:
                ms = triton.testing.do_bench(lambda: launch(candidate), warmup=5, rep=25, return_mode="median")
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
