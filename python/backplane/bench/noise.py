"""Whether a run was noisy: copy_ rows of the same bytes on the same device (several ops
copy a 1M-element float32 tensor) time the same thing, so where they disagree beyond a
threshold the machine was busy and every figure of the run is suspect. The decision is
the engine's (bench/noisy_copy.h, asked through native.py); this reads a run's copy_ rows
for it, so runs read back with --input, merged or with compiled rows get the same verdict
the engine's console gives."""
from __future__ import annotations

from .results import rows
from .native import noisy_copy_groups


def copy_timings(results: dict) -> list[tuple]:
    """(backend, dtype, bytes per call, µs) for each timed repetition of each copy_ row."""
    out = []
    for r in rows(results):
        if r.impl == "copy_" and not r.error and r.gbps:
            nbytes = round(r.gbps * 1e9 * r.median_us * 1e-6)
            out += [(r.backend, r.dtype, nbytes, us) for us in r.times_us]
    return out


def noise_warnings(results: dict) -> list[str]:
    """The console's warning lines for a noisy run; none for a quiet one."""
    return [f"WARNING: noisy run, figures unreliable (a busy machine?): {line}"
            for line in noisy_copy_groups(copy_timings(results))]


__all__ = ["copy_timings", "noise_warnings", "noisy_copy_groups"]
