"""The one reader of a run's JSON (Google Benchmark's, as backplane_bench writes it): load
and check a file, merge runs of different backends, and parse its entries into op rows
(`rows`) and per-call host costs (`call_costs`). Every table, comparison and plot reads
runs through here."""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from statistics import median

_DTYPES = ("float32", "float64", "float16", "bfloat16")


@dataclass(frozen=True)
class Row:
    op: str
    backend: str
    plugin: str        # the plugin library that served it (from the run's context)
    shape: str         # the registry preset
    dtype: str
    impl: str          # backplane | reference (PyTorch's op) | copy_ (the device's copy bandwidth) |
                       # compiled (torch.compile of the reference) | selected (torch.compile of the op)
    times_us: tuple    # one per repetition
    gbps: float | None  # 1 GB = 1e9 bytes: each input read once, each output written once
    error: str = ""
    cuda_graph: bool = False  # timed as CUDA graph replays (--cuda-graph), not eager calls
    sample_spread: float = 0.0  # the engine's "spread" counter: its samples' within one repetition
    mode: str = "eager"  # how it was timed: eager, graph (CUDA graph replays), compile, compile+graph (mode_of)
    flops: float | None = None  # FLOPs per call (the registry's flops: times the largest argument's elements)

    @property
    def median_us(self) -> float:
        return median(self.times_us) if self.times_us else math.nan

    @property
    def spread(self) -> float:
        """Half the range of the repetitions, relative to the median; one repetition: the
        spread of its samples (half their interquartile range over their median)."""
        if len(self.times_us) < 2:
            return self.sample_spread
        return (max(self.times_us) - min(self.times_us)) / (2 * self.median_us)



@dataclass(frozen=True)
class CallCost:
    """Host time of one call on a 1-element tensor: call_overhead_<op>/<backend>/<impl>/1
    rows, impl backplane (through the dispatcher) or torch (aten's own op)."""
    op: str
    backend: str
    impl: str
    times_ns: tuple    # one per repetition
    error: str = ""

    @property
    def median_ns(self) -> float:
        return median(self.times_ns) if self.times_ns else math.nan


_UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}  # Google Benchmark's time units, in µs
_MAX_FILE_BYTES = 64 << 20  # a run of every op is a few MB; more is not a run (/dev/zero)


def load(path) -> dict:
    """A run's JSON. A file cut off mid-run (the engine stopped by a timeout, say) keeps its
    complete rows, with a note on stderr; anything else that does not parse, or is not
    shaped as Google Benchmark writes it (check_run), is refused (ValueError)."""
    text = _read_text(path)
    try:
        results, cut = _loads(text), False
    except ValueError as e:
        results, cut = _complete_rows(text), True
        if results is None:
            raise ValueError(f"{path}: not a backplane bench (Google Benchmark) JSON file: {e}") from e
    check_run(results, path)
    if cut:
        print(f"backplane bench: {path} ends mid-run; its {len(results['benchmarks'])} complete entries are kept",
              file=sys.stderr)
    return results


def _loads(text: str):
    """json.loads, failing with ValueError only: also where Python's own limits refuse the
    text (an integer of more than 4300 digits is a ValueError already; nesting deeper
    than the interpreter's stack is a RecursionError)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested deeper than Python's recursion limit") from None


def _read_text(path) -> str:
    with open(path, "rb") as f:
        data = f.read(_MAX_FILE_BYTES + 1)
    if len(data) > _MAX_FILE_BYTES:
        raise ValueError(f"{path}: more than {_MAX_FILE_BYTES >> 20} MiB; not a backplane bench JSON file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a backplane bench (Google Benchmark) JSON file: {e}") from e


def check_run(results, path) -> None:
    """Refuses (ValueError naming the file and entry) what rows() could not read: the
    top level an object with a "benchmarks" list; each entry an object with a name; each
    timed entry a real_time in a known time_unit that is finite and > 0 both in µs (rows)
    and in ns (call_costs): 5e-324 ns is a number > 0 but 0 µs, and every ratio of a
    table divides by it (a failed entry has no time); a bytes_per_second >= 0 whose bytes
    per call (times the time) are finite."""
    def refuse(what):
        raise ValueError(f"{path}: {what}; expected Google Benchmark's JSON (backplane bench --json)")

    if not isinstance(results, dict):
        refuse(f"the top level is {_json_type(results)}, not an object")
    context = results.get("context", {})
    if not isinstance(context, dict):
        refuse(f'"context" is {_json_type(context)}, not an object')
    for key, value in context.items():  # those read as text (the plugin path, the date, a backend's name)
        if (key.startswith(("backend.", "shared_rows.")) or key in ("date", "pass")) and not isinstance(value, str):
            refuse(f'context "{key}" is {_json_type(value)}, not a string')
    if "runs" in context:  # merge() adds it to runs it holds in memory
        refuse('context "runs" is what merging runs adds (bench --input A B), never in a run\'s file')
    entries = results.get("benchmarks")
    if not isinstance(entries, list):
        refuse('no "benchmarks" list' if entries is None else f'"benchmarks" is {_json_type(entries)}, not a list')
    for i, e in enumerate(entries):
        where = f"benchmarks[{i}]"
        if not isinstance(e, dict):
            refuse(f"{where} is {_json_type(e)}, not an object")
        if not isinstance(e.get("name"), str) or not e["name"]:
            refuse(f'{where} has no "name" string')
        if not isinstance(e.get("run_name", ""), str):
            refuse(f'{where}: "run_name" is {_json_type(e["run_name"])}, not a string')
        where = f"{where} ({e['name']})"
        if e.get("run_type") == "aggregate" or e.get("error_occurred") or e.get("skipped"):
            continue
        unit = e.get("time_unit", "us")
        if not isinstance(unit, str) or unit not in _UNITS:
            refuse(f"{where}: time_unit {unit!r} is not one of {', '.join(_UNITS)}")
        if not _finite(e.get("real_time")) or e["real_time"] <= 0:
            refuse(f"{where}: real_time {e.get('real_time')!r} is not a time > 0")
        us = e["real_time"] * _UNITS[unit]
        if not (us > 0 and math.isfinite(us * 1e3)):
            refuse(f"{where}: real_time {e['real_time']!r} {unit} is {us:g} µs and {us * 1e3:g} ns; expected a "
                   "finite time > 0 in both")
        if "bytes_per_second" in e and (not _finite(e["bytes_per_second"]) or e["bytes_per_second"] < 0):
            refuse(f"{where}: bytes_per_second {e['bytes_per_second']!r} is not a rate >= 0")
        if "bytes_per_second" in e and not math.isfinite(e["bytes_per_second"] * us * 1e-6):
            refuse(f"{where}: bytes_per_second {e['bytes_per_second']!r} over real_time {e['real_time']!r} {unit} "
                   "is no finite number of bytes")


def _finite(value) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond float's range (JSON integers have no bound)
        return False


def _json_type(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _complete_rows(text: str) -> dict | None:
    """The run in `text` up to its last complete entry of "benchmarks" (Google Benchmark
    writes one entry per 4-space-indented object), or None."""
    if '"benchmarks": [' not in text:
        return None
    end = len(text)
    for _ in range(8):  # the last few entry ends; the file is cut inside one of them at worst
        end = text.rfind("\n    }", 0, end)
        if end < 0:
            return None
        try:
            return _loads(text[:end + 6] + "\n  ]\n}")
        except ValueError:
            continue
    return None


def pass_of(results: dict) -> str:
    """What a run's rows time: "forward", or "forward+backward" (backplane bench --backward),
    as its context's "pass" says; a run written before the key was recorded: forward."""
    return results.get("context", {}).get("pass", "forward")


def machine(ctx: dict) -> str:
    """A run's machine as reports name it: the host name, and the CPU model where the run
    recorded one (two machines may share a host name)."""
    name = f"`{ctx.get('host_name', '?')}`"
    return f"{name} ({ctx['cpu_model']})" if ctx.get("cpu_model") else name


def run_summary(name, ctx: dict) -> dict:
    """Where and when a run was made, as side_by_side names it."""
    return {"name": str(name), "machine": machine(ctx),
            **{k: ctx.get(k, "?") for k in ("date", "num_cpus", "torch_version", "timing")}}


def merge(runs: dict) -> dict:
    """Several runs as one, {name: results} (a file name, say): their rows side by side.
    Each backend must come from one run only; a backend in two runs is refused, naming
    both, rather than one of them silently kept. The context keeps each run's machine,
    torch and date under "runs". Runs of different passes (forward, forward+backward) are
    refused: their rows time different things."""
    merged = {"context": {"runs": []}, "benchmarks": []}
    owner: dict[str, str] = {}
    passes = {name: pass_of(results) for name, results in runs.items()}
    if len(set(passes.values())) > 1:
        raise ValueError("runs of different passes cannot be merged: " +
                         ", ".join(f"{name} times {p}" for name, p in passes.items()))
    if passes:
        merged["context"]["pass"] = next(iter(passes.values()))
    for name, results in runs.items():
        ctx = results.get("context", {})
        for backend in sorted({r.backend for r in rows(results)}):
            if backend in owner:
                raise ValueError(f"backend '{backend}' is in both {owner[backend]} and {name}: compare them with "
                                 f"--compare, or merge runs of different backends")
            owner[backend] = name
        merged["context"].update({k: v for k, v in ctx.items()
                                  if k.startswith(("backend.", "shared_rows.", "peak_flops."))})
        if not merged["context"]["runs"] and "cpu_model" in ctx:  # the first run's machine, as host_name
            merged["context"]["cpu_model"] = ctx["cpu_model"]
        for key in ("date", "host_name", "num_cpus", "torch_version", "timing"):
            merged["context"].setdefault(key, ctx.get(key, "?"))
        merged["context"]["runs"].append(run_summary(name, ctx))
        merged["benchmarks"] += results.get("benchmarks", [])
    return merged


def repetitions(results: dict):
    """(op, backend, impl, preset, entry) for each repetition of each row (Google Benchmark's
    aggregates left out); preset is the name's fourth part, shape_dtype for an op row."""
    for e in results.get("benchmarks", []):
        if e.get("run_type") == "aggregate":
            continue
        parts = e.get("run_name", e["name"]).split("/")[:4]
        if len(parts) == 4:
            yield (*parts, e)


def _error(entry: dict) -> str:
    """A failed entry's reason, or "" for a timed one."""
    if entry.get("error_occurred") or entry.get("skipped"):
        return entry.get("error_message") or entry.get("skip_message") or "failed"
    return ""


MODES = ("eager", "compile")  # an entry's "mode" (Python's torch.compile rows say compile; the engine's none)


def mode_of(entry: dict) -> str:
    """How a repetition was timed: its "mode" (eager where absent: the engine's rows), and
    "graph" where it was replayed from a CUDA graph: graph, or compile+graph."""
    base = entry.get("mode") if entry.get("mode") in MODES else "eager"
    if entry.get("cuda_graph"):
        return "graph" if base == "eager" else f"{base}+graph"
    return base


def peak_flops(results: dict) -> dict[tuple[str, str], float]:
    """(backend, dtype) -> the peak FLOP/s the engine measured for that backend's device
    (context "peak_flops.<backend>.<dtype>"); values that are not a finite rate > 0 are
    left out, so their rows' %peak is blank."""
    found = {}
    for key, value in results.get("context", {}).items():
        if not key.startswith("peak_flops.") or key.count(".") < 2:
            continue
        backend, _, dtype = key.removeprefix("peak_flops.").rpartition(".")
        try:
            rate = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(rate) and rate > 0 and backend:
            found[(backend, dtype)] = rate
    return found


def rows(results: dict) -> list[Row]:
    """One Row per op/backend/impl/shape_dtype, from the individual repetitions."""
    context = results.get("context", {})
    found: dict[tuple, dict] = {}
    for op, backend, impl, shape_dtype, e in repetitions(results):
        shape, _, dtype = shape_dtype.rpartition("_")
        if op.startswith("call_overhead_") or dtype not in _DTYPES:
            continue  # host cost per call (call_overhead_<op>/<backend>/<impl>/1): call_costs()
        entry = found.setdefault((op, backend, impl, shape, dtype),
                                 {"times": [], "gbps": [], "error": "", "cuda_graph": False, "spreads": [],
                                  "mode": mode_of(e), "flops": []})
        if _error(e):
            entry["error"] = _error(e)
            continue
        scale = _UNITS[e.get("time_unit", "us")]
        entry["times"].append(e["real_time"] * scale)
        entry["cuda_graph"] = entry["cuda_graph"] or bool(e.get("cuda_graph"))
        if "bytes_per_second" in e:
            entry["gbps"].append(e["bytes_per_second"] / 1e9)
        if _finite(e.get("spread")):
            entry["spreads"].append(e["spread"])
        if _finite(e.get("flops")) and e["flops"] > 0:
            entry["flops"].append(e["flops"])
        entry["mode"] = mode_of(e)
    out = []
    for (op, backend, impl, shape, dtype), v in found.items():
        plugin = context.get(f"backend.{backend}", "").split(" (")[0]
        out.append(Row(op, backend, plugin, shape, dtype, impl, tuple(v["times"]),
                       median(v["gbps"]) if v["gbps"] else None, v["error"], v["cuda_graph"],
                       median(v["spreads"]) if v["spreads"] else 0.0, v["mode"],
                       median(v["flops"]) if v["flops"] else None))
    return out


def shared_rows_owner(results: dict, backend: str) -> str:
    """The backend whose reference and copy_ rows `backend` shares: the engine times them
    once per device, under the first selected backend on it (context "shared_rows.<b>")."""
    return results.get("context", {}).get(f"shared_rows.{backend}", backend)


def call_costs(results: dict) -> list[CallCost]:
    """One CallCost per op/backend/impl of the run's call_overhead_<op> rows (the engine
    times them when no --ops is given), sorted."""
    found: dict[tuple, dict] = {}
    for name, backend, impl, _, e in repetitions(results):
        if not name.startswith("call_overhead_"):
            continue
        entry = found.setdefault((name.removeprefix("call_overhead_"), backend, impl), {"times": [], "error": ""})
        if _error(e):
            entry["error"] = _error(e)
        else:
            entry["times"].append(e["real_time"] * _UNITS[e.get("time_unit", "us")] * 1e3)
    return [CallCost(op, backend, impl, tuple(v["times"]), v["error"])
            for (op, backend, impl), v in sorted(found.items())]
