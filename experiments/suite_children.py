"""Which child processes the Python test suite starts: a pytest plugin that writes, per
test, each child's first arguments and wall time, one JSON line per test to a file per
worker; then the summary by program. How much CPU the children used against the test
processes, per test, is in the suite's timeline (tests/python/suite_timeline.py,
BACKPLANE_TEST_TIMELINE; scripts/test_timeline.py sums it):

    PYTHONPATH=$PWD/python:$PWD/experiments BACKPLANE_LIB_DIR=$PWD/build/lib \
      BACKPLANE_BIN=$PWD/build/bin/backplane SUITE_CHILDREN_OUT=/tmp/children \
      python -m pytest tests/python -p suite_children -n 2 --ignore=tests/python/npu \
      --ignore=tests/python/triton ...
    python experiments/suite_children.py /tmp/children

Limits: a child never waited for through subprocess.Popen.wait (os.system, os.fork,
multiprocessing) is not listed."""
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

_children: list[dict] = []


def _record_children() -> None:
    """Wraps Popen so that each waited-for child is listed with its wall time."""
    init, wait = subprocess.Popen.__init__, subprocess.Popen.wait

    def recording_init(self, args, *a, **k):
        self._started = time.time()
        self._first_args = [str(x) for x in (args if isinstance(args, (list, tuple)) else [args])][:4]
        init(self, args, *a, **k)

    def recording_wait(self, *a, **k):
        status = wait(self, *a, **k)
        if not getattr(self, "_listed", False):
            self._listed = True
            _children.append({"args": self._first_args, "wall": time.time() - self._started})
        return status

    subprocess.Popen.__init__, subprocess.Popen.wait = recording_init, recording_wait


def pytest_configure(config):
    out = Path(os.environ.get("SUITE_CHILDREN_OUT", "/tmp/suite_children"))
    out.mkdir(parents=True, exist_ok=True)
    config._children_file = (out / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{os.getpid()}.jsonl").open("a")
    _record_children()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _children.clear()
    yield
    line = {"test": item.nodeid, "children": list(_children)}
    item.config._children_file.write(json.dumps(line) + "\n")
    item.config._children_file.flush()


def summarize(folder: Path) -> None:
    rows = [json.loads(l) for f in sorted(folder.glob("*.jsonl")) for l in f.open()]
    print(f"{len(rows)} tests started {sum(len(r['children']) for r in rows)} child processes; by program "
          "(wall seconds, count):")
    count, wall = collections.Counter(), collections.Counter()
    for r in rows:
        for child in r["children"]:
            program = Path(child["args"][0]).name
            program = "python" if program.startswith("python") else program
            count[program] += 1
            wall[program] += child["wall"]
    for program, seconds in wall.most_common(12):
        print(f"  {seconds:7.1f} s  {count[program]:4d} x {program}")


if __name__ == "__main__":
    summarize(Path(sys.argv[1]))
