"""Whether a run was noisy: copy_ rows of the same bytes on the same device (several ops
copy a 1M-element float32 tensor) time the same thing, so where they disagree beyond a
threshold the machine was busy and every figure of the run is suspect. The engine makes
the same decision for its console (bench/noisy_copy.h); this one serves runs read back."""
from __future__ import annotations

from .results import rows

NOISY_COPY_THRESHOLD = 0.3  # the slowest copy_ 30% above the fastest, as bench/noisy_copy.h


def noisy_copy_groups(timings, threshold: float = NOISY_COPY_THRESHOLD) -> list[str]:
    """One line per group of copy_ timings that disagree beyond `threshold`; `timings`:
    (backend, dtype, bytes per call, µs per call) for each repetition of each copy_ row."""
    groups: dict[tuple, list[float]] = {}
    for backend, dtype, nbytes, us in timings:
        groups.setdefault((backend, dtype, nbytes), []).append(us)
    lines = []
    for (backend, dtype, nbytes), us in sorted(groups.items()):
        lo, hi = min(us), max(us)
        if len(us) < 2 or lo <= 0 or hi / lo <= 1 + threshold:
            continue
        lines.append(f"{backend} {dtype} copy_ of {nbytes} bytes: {len(us)} timings from {lo:.2f} to {hi:.2f} us "
                     f"({100 * (hi / lo - 1):.0f}% apart, threshold {100 * threshold:.0f}%)")
    return lines


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
