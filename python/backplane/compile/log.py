"""What the compiles of this process chose, per op call (graph_pass.py appends; kept apart
from the pass so that reading it never imports Inductor)."""
from __future__ import annotations

import collections
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
    graph}."""
    with _lock:
        return list(_log)
