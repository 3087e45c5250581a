"""Engine results made up for the tune tests (test_tune.py, test_tune_out.py,
tests/fuzz/tune_json_reader.py): rows of chosen times, as Google Benchmark writes them,
and `backplane tune` run in this process on them (--from-json: no timing)."""
import json

import backplane
from backplane.bench import tune


def context(*backends, key="CPU"):
    """The run's context naming each backend's plugin as the engine does (key and device)."""
    return {f"backend.{b}": f"/x/libbackplane_{b}.so (version 0.1.0, key {key}, device {key.lower()})"
            for b in backends}


def row(op, backend, shape, us, dtype="float32", error=None, unit="us"):
    """One entry: timed in `us` (in `unit`), or failed with `error`."""
    name = f"{op}/{backend}/backplane/{shape}_{dtype}"
    if error:
        return {"name": name, "run_name": name, "run_type": "iteration", "error_occurred": True,
                "error_message": error, "real_time": 0, "time_unit": "us"}
    return {"name": name, "run_name": name, "run_type": "iteration", "real_time": us, "time_unit": unit}


def two_sizes(a="a", b="b"):
    """add at 4K (a faster) and 1M (b faster): up to 4096 a, larger b."""
    return [row("add", a, "4K_elements", 1.0), row("add", b, "4K_elements", 2.0),
            row("add", a, "1M_elements", 10.0), row("add", b, "1M_elements", 5.0)]


def figures(path, rows, ctx=None, backends=("a", "b")):
    """`path` holding a run of `rows`; returns the path."""
    path.write_text(json.dumps({"context": ctx if ctx is not None else context(*backends), "benchmarks": rows}))
    return path


def tune_in_process(monkeypatch, *args, backends="a,b"):
    """tune.main on --from-json figures, here, with made-up plugins: loading them is left
    out (they are names only); the core still reads back the file written."""
    monkeypatch.setattr(backplane, "load", lambda *a, **k: None)
    return tune.main(["--backends", backends, *map(str, args)])
