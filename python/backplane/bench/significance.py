"""Whether one candidate is faster than another beyond noise: the one-sided form of the
Mann-Whitney U test that `bench --compare` uses (comparison.mann_whitney_p, two-sided,
normal approximation with tie correction), for `backplane tune`'s rule that a near-tie
keeps the incumbent.

Limit: below 3 samples on either side the test says nothing (None), as mann_whitney_p."""
from __future__ import annotations

from .comparison import mann_whitney_p

LEAST_SAMPLES = 3  # mann_whitney_p's own floor: fewer cannot reach any p


def faster_p(candidate, incumbent) -> float | None:
    """One-sided p-value that `candidate`'s times are smaller than `incumbent`'s (small: the
    candidate is faster beyond chance); None where either has fewer than 3 samples.

    The normal approximation is symmetric, so the one-sided p is half the two-sided one in
    the direction the samples lean, and 1 minus that half in the other."""
    two_sided = mann_whitney_p(candidate, incumbent)
    if two_sided is None:
        return None
    # U of the candidate being faster: pairs where it is smaller, ties counting half.
    u_faster = sum((c < i) + 0.5 * (c == i) for c in candidate for i in incumbent)
    leans_faster = u_faster > len(candidate) * len(incumbent) / 2
    return two_sided / 2 if leans_faster else 1 - two_sided / 2
