"""Fuzzes tune's JSON reader, which is Python (so not a libFuzzer harness): seeded random
mutations of a valid engine JSON, each written to a file and read as `tune --from-json`
and `bench --input` read one: bench.load, tune.decide, the selection file's text (it must
encode as UTF-8), and the bench views. An input must be read, or refused with the
reader's own error (a ValueError whose message starts with the file's name); any other
exception is a finding. Deterministic for a seed, bounded by --count and --seconds.

    python tests/fuzz/tune_json_reader.py [--seed 1] [--count 10000] [--seconds 45] [--artifacts DIR]

Exit 0: no finding; 1: a finding, its input kept in DIR (default build-fuzz/fuzz/artifacts)
as tune_json-<seed>-<n>.json, the traceback printed. scripts/fuzz.sh runs it after the
libFuzzer harnesses. Limits: mutations are of the JSON's values and structure, then of its
bytes; no coverage feedback, so inputs that were read go back into the pool instead.
"""
import argparse
import contextlib
import copy
import io
import json
import math
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import backplane  # noqa: E402
from backplane import bench  # noqa: E402
from backplane.bench import tune  # noqa: E402

BACKENDS = ["a", "b"]


def _entry(name, real_time, **fields):
    return {"name": name, "run_name": name, "run_type": "iteration", "real_time": real_time, "time_unit": "us",
            **fields}


def seed_run() -> dict:
    """A run as the engine writes one, with each kind of entry the readers know."""
    entries = []
    for backend, scale in (("a", 1.0), ("b", 2.0)):
        for preset, us in (("4K_elements", 2.0), ("1M_elements", 90.0), ("1M_transposed", 95.0)):
            for dtype in ("float32", "bfloat16"):
                for impl in ("backplane", "reference", "copy_"):
                    entries.append(_entry(f"add/{backend}/{impl}/{preset}_{dtype}", us * scale,
                                          bytes_per_second=1e9 / scale, spread=0.01))
        entries.append(_entry(f"call_overhead_add/{backend}/backplane/1", 900.0, time_unit="ns"))
        entries.append(_entry(f"call_overhead_add/{backend}/torch/1", 800.0, time_unit="ns"))
    entries.append({"name": "add/b/backplane/64M_elements_float32", "run_name": "add/b/backplane/64M_elements_float32",
                    "run_type": "iteration", "error_occurred": True, "error_message": "wrong result",
                    "real_time": 0, "time_unit": "us"})
    entries.append(_entry("add/a/backplane/64M_elements_float32_median", 5000.0, run_type="aggregate",
                          aggregate_name="median", cuda_graph=1))
    context = {f"backend.{b}": f"/x/libbackplane_{b}.so (version 0.1.0, key CPU, device cpu)" for b in BACKENDS}
    context.update({"date": "2026-01-01T00:00:00+00:00", "host_name": "vm", "cpu_model": "Example CPU",
                    "num_cpus": 2, "torch_version": "2.11.0", "pass": "forward", "timing": "wall clock",
                    "shared_rows.b": "a"})
    return {"context": context, "benchmarks": entries}


# Values the readers branch on, and the edges of numbers and text.
VALUES = [0, -1, 1, 2, 5e-324, 1e-320, 1e-300, 1e300, 1.7e308, math.nan, math.inf, -math.inf, 10 ** 400, True,
          False, None, "", "x", "ns", "us", "ms", "s", "h", "aggregate", "iteration", "forward",
          "forward+backward", "\ud800", "caf\udce9", "null", "~", "a\nb", '"', "\\", [], {}, [[]], {"name": "x"},
          "/x/lib.so (version 0.1.0, key null, device cpu)", "/x/lib.so (version 0.1.0, key CUDA, device cuda:0)",
          "/x/lib.so (version 0.1.0, key \u00e9, device cpu)"]
KEYS = ["name", "run_name", "run_type", "real_time", "time_unit", "error_occurred", "error_message", "skipped",
        "skip_message", "bytes_per_second", "spread", "cuda_graph", "backend.a", "backend.b", "backend.c",
        "shared_rows.a", "shared_rows.b", "host_name", "cpu_model", "torch_version", "date", "pass", "runs",
        "num_cpus", "timing", "context", "benchmarks"]
BYTES = [b"\xff", b"\xc3", b"\x00", b"[", b"{", b"}", b'"', b"1e999", b"\n    }"]  # the last: an entry's end
NAME_PARTS = ["add", "mul", "rms_norm", "call_overhead_add", "a", "b", "c", "backplane", "reference", "copy_",
              "compiled", "torch", "4K_elements_float32", "1M_elements_bfloat16", "64M_elements_float16",
              "9G_elements_float32", "4K\ud800_float32", "1", "", "x_y"]


def _nodes(value, path=()):
    """(path, node) of every container and scalar in `value`."""
    yield path, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from _nodes(child, path + (key,))


def _parent(doc, path):
    for key in path[:-1]:
        doc = doc[key]
    return doc


def mutate_structure(doc, rng: random.Random):
    """One change to a parsed run: a value replaced, removed, copied or added; a name's parts changed."""
    nodes = list(_nodes(doc))
    path, node = rng.choice(nodes)
    kind = rng.randrange(6)
    if not path:
        return doc if kind else rng.choice(VALUES)
    parent, key = _parent(doc, path), path[-1]
    if kind == 0:
        parent[key] = copy.deepcopy(rng.choice(VALUES))
    elif kind == 1:
        del parent[key]
    elif kind == 2 and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(node))
    elif kind == 3 and isinstance(node, dict):
        node[rng.choice(KEYS)] = copy.deepcopy(rng.choice(VALUES + [n for _, n in rng.sample(nodes, 1)]))
    elif kind == 4 and isinstance(node, str):
        parts = node.split("/")
        parts[rng.randrange(len(parts))] = rng.choice(NAME_PARTS)
        if rng.random() < 0.2:
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(NAME_PARTS))
        parent[key] = "/".join(parts)
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        try:
            parent[key] = node * rng.choice([0, -1, 1e-300, 1e300, 10 ** 300, 0.5])
        except OverflowError:  # an int beyond float's range, times a float
            parent[key] = math.inf
    else:
        parent[key] = copy.deepcopy(rng.choice(VALUES))
    return doc


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """One change to the text: cut off (as a stopped engine leaves it), a byte flipped, bytes inserted or removed."""
    if not data:
        return bytes([rng.randrange(256)])
    at = rng.randrange(len(data))
    kind = rng.randrange(4)
    if kind == 0:
        return data[:at]
    if kind == 1:
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]
    if kind == 2:
        return data[:at] + rng.choice(BYTES) + data[at:]
    return data[:at] + data[at + rng.randrange(1, 16):]


def make_input(pool: list, rng: random.Random) -> bytes:
    doc = json.loads(rng.choice(pool))
    for _ in range(rng.randint(1, 4)):
        doc = mutate_structure(doc, rng)
    data = json.dumps(doc, indent=4 if rng.random() < 0.5 else None).encode("utf-8", "surrogatepass")
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        data = mutate_bytes(data, rng)
    return data


def read_as_tune_and_bench_do(path: Path, ops) -> bool:
    """True: read; False: refused by the reader. Anything else raises."""
    try:
        results = bench.load(path)
    except ValueError as e:
        if not str(e).startswith(f"{path}: "):
            raise AssertionError(f"a ValueError that is not the reader's own (it names no file): {e}") from e
        return False
    decision = tune.decide(results, ops, BACKENDS)
    made_by = tune.made_by(["--from-json", str(path)], results.get("context", {}))
    tune.selection_yaml(decision.entries, made_by, decision.left_out).encode("utf-8")
    for view in (bench.format_table, bench.markdown, bench.side_by_side):
        view(results)
    bench.compare(results, results)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=10000, help="inputs to try (default 10000)")
    p.add_argument("--seconds", type=float, default=45.0, help="stop after this long, whatever the count (default 45)")
    p.add_argument("--artifacts", type=Path, default=REPO / "build-fuzz" / "fuzz" / "artifacts")
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    ops = backplane.ops()
    pool = [json.dumps(seed_run())]
    start, read, refused = time.monotonic(), 0, 0
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.json"
        for n in range(args.count):
            if time.monotonic() - start > args.seconds:
                break
            data = make_input(pool, rng)
            path.write_bytes(data)
            try:
                with contextlib.redirect_stderr(io.StringIO()):  # "ends mid-run" notes
                    ok = read_as_tune_and_bench_do(path, ops)
            except Exception:  # noqa: BLE001  (any other exception is what this looks for)
                args.artifacts.mkdir(parents=True, exist_ok=True)
                kept = args.artifacts / f"tune_json-{args.seed}-{n}.json"
                kept.write_bytes(data)
                traceback.print_exc()
                print(f"tune_json_reader: a finding at input {n} of seed {args.seed}: kept in {kept}", file=sys.stderr)
                return 1
            read, refused = read + ok, refused + (not ok)
            if ok and len(pool) < 64 and len(data) < 1 << 20:
                with contextlib.suppress(UnicodeDecodeError, ValueError):
                    pool.append(json.dumps(json.loads(data.decode("utf-8"))))
    print(f"tune_json_reader: seed {args.seed}: {read + refused} inputs in {time.monotonic() - start:.1f} s, "
          f"{read} read, {refused} refused by the reader, no finding")
    return 0


if __name__ == "__main__":
    sys.exit(main())
