"""python -m backplane list|ops|check|bench|tune: the same views as the C++ `backplane`
command (check: backplane.check_command, which the C++ one runs for a plugin of kind
triton; bench: see backplane.bench; tune: backplane.bench.tune)."""
from __future__ import annotations

import argparse
import sys

import backplane


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from . import bench

        return bench.main(argv[1:])
    if argv[:1] == ["check"]:
        from .check_command import main as check_main

        return check_main(argv[1:])
    if argv[:1] == ["tune"]:
        from .bench import tune

        return tune.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m backplane")
    parser.add_argument("command", choices=["list", "ops"])
    parser.add_argument("--backends", default="", help="load these first (comma separated)")
    args = parser.parse_args(argv)
    try:
        if args.backends:
            backplane.load(args.backends)
    except backplane.BackendError as e:
        print(f"backplane: {e}", file=sys.stderr)
        return 1
    if args.command == "list":
        for b in backplane.backends():
            kind = "" if b.kind == "shared_library" else f" [{b.kind}]"
            print(f"{b.name:10} {b.status:11} {b.dispatch_key or '-':12} {len(b.ops):3} ops  {b.reason or b.path}{kind}")
    else:
        for op in backplane.ops():
            cells = " ".join(f"{name}:{'yes' if dtypes else 'MISSING'}" for name, dtypes in op.backends.items())
            print(f"{op.name:14} {cells:40} {op.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
