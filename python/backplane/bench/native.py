"""The bench's stop rule, noise verdict and console table, asked of their one owner, the
engine (bench/adaptive_stop.h, bench/noisy_copy.h, bench/console_table.h), through
lib/backplane_bench_c_api.so (bench/c_api.cpp), built beside the engine. Nothing here
decides or formats: the Python side (timing.py's sampling of torch.compile rows, noise.py's
verdict and tables.py's console table of runs read back) asks.
Limit: without the library (a build with BACKPLANE_BUILD_BENCH=OFF) these raise
FileNotFoundError naming it; such a build has no engine to run either."""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

from .._native import lib_dir

LIBRARY = "backplane_bench_c_api.so"


class _CStopRule(ctypes.Structure):  # struct BackplaneBenchStopRule
    _fields_ = [("min_seconds", ctypes.c_double), ("max_seconds", ctypes.c_double),
                ("target_spread", ctypes.c_double), ("min_samples", ctypes.c_uint64)]


@functools.cache
def _library() -> ctypes.CDLL:
    path = lib_dir() / LIBRARY
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the bench's rules are built with the engine "
                                "(BACKPLANE_BUILD_BENCH=ON; `make build` does it)")
    lib = ctypes.CDLL(str(path))
    doubles, u64 = ctypes.POINTER(ctypes.c_double), ctypes.c_uint64
    lib.backplane_bench_default_stop_rule.restype = _CStopRule
    lib.backplane_bench_relative_spread.argtypes = [doubles, u64]
    lib.backplane_bench_relative_spread.restype = ctypes.c_double
    lib.backplane_bench_should_stop.argtypes = [doubles, u64, ctypes.c_double, ctypes.POINTER(_CStopRule)]
    lib.backplane_bench_should_stop.restype = ctypes.c_int
    lib.backplane_bench_noisy_copy_threshold.restype = ctypes.c_double
    strings = ctypes.POINTER(ctypes.c_char_p)
    lib.backplane_bench_noisy_copy_groups.argtypes = [strings, strings, ctypes.POINTER(ctypes.c_int64), doubles, u64,
                                                      ctypes.c_double, ctypes.c_char_p, u64]
    lib.backplane_bench_noisy_copy_groups.restype = u64
    lib.backplane_bench_table_new.argtypes = [strings, strings, u64, ctypes.c_int]
    lib.backplane_bench_table_new.restype = ctypes.c_void_p
    lib.backplane_bench_table_add_run.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double, ctypes.c_double,
                                                  ctypes.c_double, ctypes.c_char_p, ctypes.c_double, ctypes.c_char_p]
    lib.backplane_bench_table_set_peak_flops.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                                         ctypes.c_double]
    lib.backplane_bench_table_format.argtypes = [ctypes.c_void_p, ctypes.c_char_p, u64]
    lib.backplane_bench_table_format.restype = u64
    lib.backplane_bench_table_free.argtypes = [ctypes.c_void_p]
    return lib


def _doubles(values) -> ctypes.Array:
    return (ctypes.c_double * len(values))(*values)


@dataclass(frozen=True)
class StopRule:
    """adaptive_stop.h's StopRule; the defaults are the engine's (default_stop_rule())."""
    min_seconds: float
    max_seconds: float
    target_spread: float
    min_samples: int

    def _c(self) -> _CStopRule:
        return _CStopRule(self.min_seconds, self.max_seconds, self.target_spread, self.min_samples)


def default_stop_rule() -> StopRule:
    r = _library().backplane_bench_default_stop_rule()
    return StopRule(r.min_seconds, r.max_seconds, r.target_spread, r.min_samples)


def relative_spread(samples) -> float:
    """Half the interquartile range over the median; 0 for fewer than two samples."""
    samples = list(samples)
    return _library().backplane_bench_relative_spread(_doubles(samples), len(samples))


def should_stop(samples, elapsed: float, rule: StopRule) -> bool:
    """Whether sampling stops after `elapsed` seconds of `samples` (seconds per call)."""
    samples = list(samples)
    return bool(_library().backplane_bench_should_stop(_doubles(samples), len(samples), elapsed, rule._c()))


def noisy_copy_threshold() -> float:
    return _library().backplane_bench_noisy_copy_threshold()


def noisy_copy_groups(timings, threshold: float | None = None) -> list[str]:
    """One line per group of copy_ timings that disagree beyond `threshold` (default: the
    engine's); `timings`: (backend, dtype, bytes per call, µs per call) per repetition."""
    timings = list(timings)
    n = len(timings)
    backends = (ctypes.c_char_p * n)(*(t[0].encode() for t in timings))
    dtypes = (ctypes.c_char_p * n)(*(t[1].encode() for t in timings))
    nbytes = (ctypes.c_int64 * n)(*(int(t[2]) for t in timings))
    us = _doubles([t[3] for t in timings])
    limit = noisy_copy_threshold() if threshold is None else threshold
    text = _text(lambda out, size: _library().backplane_bench_noisy_copy_groups(backends, dtypes, nbytes, us, n,
                                                                                limit, out, size))
    return text.split("\n") if text else []


def _text(call) -> str:
    """The text a C entry writes with `call(out, out_size)`, which returns the size it needs."""
    size = call(None, 0)
    out = ctypes.create_string_buffer(size)
    call(out, size)
    return out.value.decode("utf-8", "replace")


def _c_string(text: str) -> bytes:
    """UTF-8; what it cannot encode (a lone surrogate a JSON file may hold) replaced."""
    return str(text).encode("utf-8", "replace")


def _strings(values) -> ctypes.Array:
    return (ctypes.c_char_p * len(values))(*(_c_string(v) for v in values))


def console_table(repetitions, shared_rows: dict, backward: bool, peak_flops: dict | None = None) -> str:
    """The engine's console table (bench/console_table.h) of a run's repetitions, each
    (run name, seconds per call, bytes per second or None, spread or None, error or "",
    FLOPs per call or None, mode) as Google Benchmark reports them; shared_rows: backend ->
    the backend whose reference and copy_ rows it reads; peak_flops: (backend, dtype) ->
    the measured FLOP/s the %peak column reads against."""
    lib = _library()
    nan = float("nan")
    table = lib.backplane_bench_table_new(_strings(list(shared_rows)), _strings(list(shared_rows.values())),
                                          len(shared_rows), int(backward))
    try:
        for (backend, dtype), rate in (peak_flops or {}).items():
            lib.backplane_bench_table_set_peak_flops(table, _c_string(backend), _c_string(dtype), rate)
        for name, seconds, bps, spread, error, flops, mode in repetitions:
            lib.backplane_bench_table_add_run(table, _c_string(name), seconds, nan if bps is None else bps,
                                              nan if spread is None else spread, _c_string(error),
                                              nan if flops is None else flops, _c_string(mode))
        return _text(lambda out, size: lib.backplane_bench_table_format(table, out, size))
    finally:
        lib.backplane_bench_table_free(table)
