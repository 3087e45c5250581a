"""When BACKPLANE_TEST_TIMELINE names a folder, every pytest process (each xdist worker,
and each suite scripts/test.sh runs side by side) appends one JSON line per test to a file
of its own there: the suite (pytest's arguments), the worker, the test, when it started
and ended (seconds since the epoch, setup and teardown included), and the CPU-seconds it
used in its own process and in the child processes reaped meanwhile (`self_cpu`,
`child_cpu`: getrusage). scripts/test_timeline.py
reads the folder back: how long each worker was busy and idle, and what the worker that
finished last ran. A question it answers that --durations cannot: whether the suite is
bound by its total work or by how the work was dealt.

Limits: time between two tests (xdist's own scheduling) counts as idle; a test a worker
crashed in has no line; a child's CPU time counts only once it is reaped, and a child's
own children only where it reaped them."""
import functools
import json
import os
import resource
import time
from pathlib import Path

import pytest

FOLDER_VARIABLE = "BACKPLANE_TEST_TIMELINE"
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


@functools.cache
def _file() -> Path | None:
    """This process's timeline file, its folder made; None when the variable is unset."""
    folder = os.environ.get(FOLDER_VARIABLE)
    if not folder:
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    return Path(folder) / f"{_WORKER}-{os.getpid()}.jsonl"


def _cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.time()
    self_cpu, child_cpu = _cpu_seconds(resource.RUSAGE_SELF), _cpu_seconds(resource.RUSAGE_CHILDREN)
    yield
    path = _file()
    if path is None:
        return
    line = {"suite": " ".join(map(str, item.config.args)), "worker": _WORKER,
            "test": item.nodeid, "start": start, "end": time.time(),
            "self_cpu": _cpu_seconds(resource.RUSAGE_SELF) - self_cpu,
            "child_cpu": _cpu_seconds(resource.RUSAGE_CHILDREN) - child_cpu}
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")
