"""`python -m backplane check --backends NAMES [--ops a,b] [--no-gradients] [-v]`: the
conformance suite on named backends, one line per op, as the C++ `backplane check` prints
it. The C++ command runs this in its place when it is asked to check a plugin of kind
triton, whose kernels are Python launchers and load only in a Python process
(triton_kind.py). Exit status 1 when a check fails or a named backend cannot be checked."""
from __future__ import annotations

import argparse
import sys

import backplane


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m backplane check")
    parser.add_argument("names", nargs="*", help="backends to check (or --backends)")
    parser.add_argument("--backends", default="", help="comma separated")
    parser.add_argument("--ops", default="", help="only these ops (comma separated)")
    parser.add_argument("--no-gradients", action="store_true", help="leave out the gradient cases")
    parser.add_argument("--allow-missing-device", action="store_true", help="pass a backend without its device")
    parser.add_argument("-v", action="store_true", dest="verbose", help="every failure in full")
    args = parser.parse_args(argv)
    names = [n for n in [*args.names, *args.backends.split(",")] if n.strip()]
    if not names:
        print("python -m backplane check: name the backends to check (--backends)", file=sys.stderr)
        return 2
    failures, unchecked = 0, []
    w = max(12, *(len(n) + 2 for n in names))
    print(f"{'BACKEND':{w}}{'OP':20}{'PASSED':8}{'FAILED':8}SKIPPED")
    for name in names:
        try:
            backplane.load(name)
            results = backplane.check(name, args.ops, gradients=not args.no_gradients)
        except backplane.BackendError as e:
            print(f"{name:{w}}not checked: {e}")
            unchecked.append(name)
            continue
        by_op: dict[str, list] = {}
        for r in results:
            by_op.setdefault(r.op, []).append(r)
        for op, rows in by_op.items():
            if any(r.outcome == "not implemented" for r in rows):
                print(f"{name:{w}}{op:20}not implemented on {name}")
                continue
            bad = [r for r in rows if r.outcome == "failed"]
            count = {o: sum(r.outcome == o for r in rows) for o in ("passed", "failed", "skipped")}
            print(f"{name:{w}}{op:20}{count['passed']:<8}{count['failed']:<8}{count['skipped']}")
            for r in bad if args.verbose else bad[:3]:
                print(f"    FAILED {r.case} [{r.dtype}]: {r.detail if args.verbose else r.detail.splitlines()[0]}")
            failures += len(bad)
    if failures:
        print("some checks FAILED")
    elif unchecked:
        print(f"not checked: {', '.join(unchecked)}")
    else:
        print("every implemented op passed against PyTorch")
    missing_fails = unchecked and not args.allow_missing_device
    return 1 if failures or missing_fails else 0
