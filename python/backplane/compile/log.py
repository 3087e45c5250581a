"""What the compiles of this process chose, per op call (graph_pass.py appends; kept apart
from the pass so that reading it never imports Inductor)."""
from __future__ import annotations

import collections
import sys
import threading

_LIMIT = 10000  # resolutions kept: a long-running server compiling for ever keeps the newest
_log: collections.deque = collections.deque(maxlen=_LIMIT)
_lock = threading.Lock()


def record(chosen: list[dict]) -> None:
    with _lock:
        _log.extend(chosen)


def resolutions() -> list[dict]:
    """Oldest first: {op, dispatch_key, dtype, size (an int, or the symbolic sizes), choice
    ("inductor", a plugin's name, or "plugin (why the call was kept)"), traced (True where
    the call was replaced in the graph: by the reference, or by a triton plugin's kernels),
    graph}.

    Limit: a graph Inductor serves from its FX graph cache (compiled before under the same
    selection, in this process or an earlier one with the same cache folder) is not passed
    through the pass again, so it adds no rows; graphs_from_cache() counts them. Its code is
    the one compiled then, under the same choices."""
    with _lock:
        return list(_log)


def graphs_from_cache() -> int:
    """How many graphs this process's compiles took from Inductor's FX graph cache (their
    choices are not in resolutions()); 0 where nothing was compiled."""
    utils = sys.modules.get("torch._dynamo.utils")
    return int(utils.counters["inductor"].get("fxgraph_cache_hit", 0)) if utils is not None else 0
