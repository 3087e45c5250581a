#!/usr/bin/env python3
"""Reads the folder BACKPLANE_TEST_TIMELINE filled (tests/python/suite_timeline.py) and
prints, per suite: its span (first test's start to last test's end), its work (the sum
of every test's time), the CPU-seconds of its test processes and of their child processes,
and what that work would take dealt perfectly over its workers; per
worker, when it began and finished, how long it was busy and its longest tests; and the
whole run of the worker that finished last.

    BACKPLANE_TEST_TIMELINE=/tmp/timeline make test
    python3 scripts/test_timeline.py /tmp/timeline [--top N]
"""
import argparse
import collections
import json
from pathlib import Path


def load(folder: Path) -> dict[str, list[dict]]:
    suites = collections.defaultdict(list)
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            test = json.loads(line)
            suites[test["suite"]].append(test)
    return suites


def report(suite: str, tests: list[dict], top: int) -> None:
    t0 = min(t["start"] for t in tests)
    span = max(t["end"] for t in tests) - t0
    work = sum(t["end"] - t["start"] for t in tests)
    workers = collections.defaultdict(list)
    for t in tests:
        workers[t["worker"]].append(t)
    print(f"suite {suite!r}: {len(tests)} tests on {len(workers)} workers; span {span:.0f} s, work {work:.0f} "
          f"worker-s, dealt perfectly {work / len(workers):.0f} s")
    if all("child_cpu" in t for t in tests):  # lines written before the CPU fields have none
        print(f"  CPU: {sum(t['self_cpu'] for t in tests):.0f} s in the test processes, "
              f"{sum(t['child_cpu'] for t in tests):.0f} s in child processes")
    last = None
    for name, own in sorted(workers.items(), key=lambda kv: max(t["end"] for t in kv[1])):
        own.sort(key=lambda t: t["start"])
        busy = sum(t["end"] - t["start"] for t in own)
        begin, end = own[0]["start"] - t0, own[-1]["end"] - t0
        longest = sorted(own, key=lambda t: t["end"] - t["start"], reverse=True)[:top]
        print(f"  {name}: {begin:5.0f} -> {end:5.0f} s, busy {busy:5.0f} s, idle {end - begin - busy:4.0f} s; longest: "
              + ", ".join(f"{t['test'].split('::')[-1]} {t['end'] - t['start']:.0f} s" for t in longest))
        last = own
    print("  the last worker's tests, in order (start s, seconds):")
    for t in last:
        if t["end"] - t["start"] >= 1:
            print(f"    {t['start'] - t0:6.0f} {t['end'] - t['start']:5.0f}  {t['test']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--top", type=int, default=3, help="longest tests to name per worker (default 3)")
    args = parser.parse_args()
    suites = load(args.folder)
    if not suites:
        raise SystemExit(f"{args.folder}: no timeline files (*.jsonl); was BACKPLANE_TEST_TIMELINE set to it?")
    for suite, tests in suites.items():
        report(suite, tests, args.top)


if __name__ == "__main__":
    main()
