"""Every rank's value of something only some ranks may ask for, with a deadline.

A collective (all_gather_object) called on some ranks only waits for the others until the
group's timeout (30 minutes by default), then fails without saying who never came. This
meets through the default group's store instead: each rank puts its value under a key of
its own, waits at most BACKPLANE_SELECTION_TIMEOUT seconds for the others', then raises
ValueError naming the ranks that did not come. A rank that comes after another gave up
finds that rank's mark in its own key's place (compare_set is atomic) and raises too, so no
rank goes on as if the ranks had agreed.

A rank that has its answer waits (BACKPLANE_SELECTION_TIMEOUT more at most) until every
rank has read the values before it returns: the store lives in one rank's process (rank
0's TCPStore), and a rank 0 that returned and exited at once would leave a slower rank
reading a closed store ("Failed to recv, got 0 bytes").

Limits: the n-th exchange of one `topic` in a process meets the n-th of every other rank,
so ranks must ask in the same order; values are str. After an exchange that timed out the
ranks no longer agree on n: restart the job rather than retry. Waiting costs one store
request per poll (backing off to 0.25 s), and one more to read the values.
"""
from __future__ import annotations

import itertools
import math
import os
import time

TIMEOUT_VARIABLE = "BACKPLANE_SELECTION_TIMEOUT"
TIMEOUT_DEFAULT_S = 60.0
_GAVE_UP = "gave up: "  # never the start of a value a caller gives (checked)
_rounds: dict[str, itertools.count] = {}


def timeout_s() -> float:
    """BACKPLANE_SELECTION_TIMEOUT in seconds (default 60); ValueError naming a bad value."""
    text = os.environ.get(TIMEOUT_VARIABLE, "")
    if not text:
        return TIMEOUT_DEFAULT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{TIMEOUT_VARIABLE}={text!r}: expected seconds, a number above 0")
    return value


def exchange_with_deadline(dist, topic: str, value: str, about: str, doing: str) -> list[str]:
    """Every rank's `value`, by rank, from the ranks of the default group that call this too.
    `about` and `doing` word the error: "{about}: ranks [1] did not {doing} within 60 s"."""
    # The round first: a call that raises below still counts, as it does on the other ranks.
    prefix = f"backplane/{topic}/{next(_rounds.setdefault(topic, itertools.count(1)))}/"
    if value.startswith(_GAVE_UP):
        raise ValueError(f"{about}: a value may not start with the exchange's own mark")
    deadline_s = timeout_s()
    store = dist.distributed_c10d._get_default_store()
    rank, world = dist.get_rank(), dist.get_world_size()
    # compare_set from "": set where absent, and say what the key holds now.
    mine = store.compare_set(prefix + str(rank), "", value).decode()
    if mine != value:
        raise ValueError(f"{about}: {mine[len(_GAVE_UP):]} for rank {rank} to {doing}, and gave up; every rank must "
                         "do it at the same point")
    others = [r for r in range(world) if r != rank]
    keys = [prefix + str(r) for r in others]
    end, pause = time.monotonic() + deadline_s, 0.005
    while keys and not store.check(keys):  # one request for every key
        if time.monotonic() >= end:
            break
        time.sleep(pause)
        pause = min(2 * pause, 0.25)
    else:
        got = [v.decode() for v in (store.multi_get(keys) if hasattr(store, "multi_get") and keys
                                    else [store.get(k) for k in keys])]
        # A key may hold the mark of a rank that gave up on its owner: that owner never came.
        if not any(v.startswith(_GAVE_UP) for v in got):
            _wait_until_every_rank_has_read(store, prefix, world, deadline_s)
            return [value if r == rank else got[others.index(r)] for r in range(world)]
    values, missing = {rank: value}, []
    mark = f"{_GAVE_UP}rank {rank} waited {deadline_s:g} s ({TIMEOUT_VARIABLE})"
    for r in others:  # a rank arriving now finds the mark, or its value is taken: never both
        got = store.compare_set(prefix + str(r), "", mark).decode()
        if got.startswith(_GAVE_UP):
            missing.append(r)
        else:
            values[r] = got
    if missing:
        raise ValueError(f"{about}: ranks {missing} did not {doing} within {deadline_s:g} s ({TIMEOUT_VARIABLE}, "
                         f"default {TIMEOUT_DEFAULT_S:g}); every rank must do it at the same point, or the ranks "
                         "that do wait for the others")
    _wait_until_every_rank_has_read(store, prefix, world, deadline_s)
    return [values[r] for r in range(world)]


def _wait_until_every_rank_has_read(store, prefix: str, world: int, deadline_s: float) -> None:
    """Counts this rank as done reading `prefix`'s values, then waits, deadline_s at most,
    for every rank to count. Past it, it returns anyway: every rank came (this rank read all
    their values), so a rank not counted is one that died since."""
    key, pause, end = prefix + "read", 0.005, time.monotonic() + deadline_s
    done = store.add(key, 1)
    while done < world and time.monotonic() < end:
        time.sleep(pause)
        pause = min(2 * pause, 0.25)
        done = store.add(key, 0)
