"""`backplane tune` (python/backplane/bench/tune.py): how measurements become a selection
file, and, end to end, cpu_alt against cpu on add (tests/fixtures/alt_plugin.cpp: as fast
as aten's for small tensors, several times slower for large ones, by construction). The
decisions are checked on given figures (--from-json); the engine run is checked for what
it must produce whatever the machine's load, never for which plugin won."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import backplane
from conftest import child_env, run_python
from backplane.bench import tune
from backplane.bench import rows as bench_rows
from tune_runs import context as _context, row as _row, two_sizes

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"
OPS = backplane.ops()


def _decision(rows, backends=("fast", "slow"), margin=0.05, context=None):
    results = {"context": context or _context(*backends), "benchmarks": rows}
    return tune.decide(results, OPS, list(backends), margin)


def _decide(rows, backends=("fast", "slow"), margin=0.05, context=None):
    """The entries, where every size was decided."""
    decision = _decision(rows, backends, margin, context)
    assert decision.left_out == [], decision.left_out
    return decision.entries


def test_sizes_come_from_the_largest_tensor_of_each_preset():
    sizes = tune.preset_sizes(next(op for op in OPS if op.name == "add"))
    assert sizes["4K_elements"] == 4096 and sizes["1M_broadcast_row"] == 1 << 20 and sizes["64M_elements"] == 1 << 26


def test_each_size_goes_to_the_fastest_beyond_the_margin_and_neighbours_merge():
    rows = [_row("add", "a", "4K_elements", 1.0), _row("add", "b", "4K_elements", 2.0),
            _row("add", "a", "1M_elements", 10.0), _row("add", "b", "1M_elements", 5.0),
            # the same size in another layout is decided together with 1M_elements
            _row("add", "a", "1M_transposed", 10.0), _row("add", "b", "1M_transposed", 5.0),
            _row("add", "a", "64M_elements", 900.0), _row("add", "b", "64M_elements", 600.0)]
    (entry,) = _decide(rows, ("a", "b"))
    assert (entry["op"], entry["dispatch_key"]) == ("add", "CPU")
    assert [(b.get("up_to"), b["plugin"]) for b in entry["buckets"]] == [(4096, "a"), (None, "b")]
    assert [m["preset"] for m in entry["buckets"][1]["measured"]] == ["1M_elements", "1M_transposed", "64M_elements"]
    assert entry["buckets"][0]["measured"] == [{"preset": "4K_elements", "dtype": "float32", "elements": 4096,
                                                "median_us": {"a": 1.0, "b": 2.0}, "repetitions": {"a": 1, "b": 1}}]


def test_within_the_margin_the_incumbent_keeps_a_size():
    rows = [_row("add", "a", "4K_elements", 1.00), _row("add", "b", "4K_elements", 0.97)]
    assert [b["plugin"] for b in _decide(rows, ("a", "b"))[0]["buckets"]] == ["a"]
    assert [b["plugin"] for b in _decide(rows, ("a", "b"), margin=0.01)[0]["buckets"]] == ["b"]
    assert [b["plugin"] for b in _decide(rows, ("b", "a"))[0]["buckets"]] == ["b"], "the first named is incumbent"


def test_dtypes_are_decided_apart():
    # b is twice as fast in float32, four times slower in bfloat16: an entry per dtype
    # (test_tune_modes.py: dtypes of the same winners share one entry).
    rows = [_row("add", "a", "4K_elements", 1.0), _row("add", "b", "4K_elements", 0.5),
            _row("add", "a", "4K_elements", 1.0, "bfloat16"), _row("add", "b", "4K_elements", 4.0, "bfloat16")]
    assert [(e["dtype"], [b["plugin"] for b in e["buckets"]]) for e in _decide(rows, ("a", "b"))] == \
        [("bfloat16", ["a"]), ("float32", ["b"])]


def test_a_failed_row_disqualifies_its_plugin_at_that_size():
    rows = [_row("add", "a", "4K_elements", 2.0), _row("add", "b", "4K_elements", 0, error="wrong result")]
    assert [b["plugin"] for b in _decide(rows, ("a", "b"))[0]["buckets"]] == ["a"]


def test_ops_of_one_plugin_and_other_devices_are_left_out():
    rows = [_row("add", "a", "4K_elements", 1.0), _row("add", "b", "4K_elements", 0.5),
            _row("mul", "a", "1M_elements", 1.0)]
    context = {**_context("a"), **_context("b", key="CUDA")}
    assert _decide(rows, ("a", "b"), context=context) == []
    assert [e["op"] for e in _decide(rows, ("a", "b"))] == ["add"]


@pytest.mark.filterwarnings("ignore:.*names plugins that are not loaded")  # a and b are names only
def test_the_written_file_is_read_back_by_the_core(tmp_path):
    path = tmp_path / "selection.yaml"
    path.write_text(tune.selection_yaml(_decide(two_sizes(), ("a", "b")), {"command": 'backplane tune "quoted"'}))
    before = backplane.selection_file()
    try:
        assert backplane.apply_selection(path) == str(path)
    finally:
        backplane.apply_selection(before or None)
    assert '      - {up_to: 4096, plugin: "a", measured: [' in path.read_text()


# A run cut off mid-way (the engine stopped by a timeout) is read as far as it got; the
# sizes it did not finish are not decided from one plugin's rows alone.
def test_a_size_without_a_row_of_every_plugin_is_left_out_and_said():
    rows = [*two_sizes(), _row("add", "b", "64M_elements", 600.0)]  # cut off before a's 64M row
    decision = _decision(rows, ("a", "b"))
    (entry,) = decision.entries
    assert [(b.get("up_to"), b["plugin"]) for b in entry["buckets"]] == [(4096, "a"), (None, "b")]
    assert [m["preset"] for m in entry["buckets"][1]["measured"]] == ["1M_elements"]
    assert decision.left_out == ["add on CPU: 67108864 elements: no row of a at 64M_elements float32"]


def test_an_op_the_run_never_timed_on_its_second_plugin_is_said():
    """Cut off before b's first row: add has rows of a alone. b implements add on the same key
    (the registry's coverage says so), so the op is named as left out, not silently dropped."""
    import dataclasses

    ops = [dataclasses.replace(op, backends={"a": ("float32",), "b": ("float32",)}) if op.name == "add" else op
           for op in OPS]
    rows = [_row("add", "a", "4K_elements", 1.0), _row("add", "a", "1M_elements", 2.0)]
    decision = tune.decide({"context": _context("a", "b"), "benchmarks": rows}, ops, ["a", "b"], 0.05)
    assert decision.entries == []
    assert decision.left_out == ["add on CPU: only a has rows; b also serves it here and has none (a run cut off "
                                 "before it?), so no size is decided"]
    # A plugin that does not implement the op is no reason to say anything.
    assert tune.decide({"context": _context("a", "b"), "benchmarks": rows}, OPS, ["a", "b"], 0.05).left_out == []


def test_a_size_missing_one_dtype_of_a_plugin_is_left_out():
    rows = [*two_sizes(), _row("add", "a", "1M_elements", 9.0, "bfloat16")]  # b's bfloat16 row never came
    decision = _decision(rows, ("a", "b"))
    # float32 is decided at both sizes; bfloat16 at none, so its calls take float32's entry.
    assert [[(b.get("up_to"), b["plugin"]) for b in e["buckets"]] for e in decision.entries] == \
        [[(4096, "a"), (None, "b")]]
    assert decision.left_out == ["add on CPU: 1048576 elements: no row of b at 1M_elements bfloat16",
                                 "add on CPU: no size decided in bfloat16; its calls take the entry without dtype"]


def test_a_size_where_every_plugin_failed_is_left_out():
    rows = [*two_sizes()[:2], _row("add", "a", "1M_elements", 0, error="wrong"),
            _row("add", "b", "1M_elements", 0, error="wrong")]
    decision = _decision(rows, ("a", "b"))
    assert [[b["plugin"] for b in e["buckets"]] for e in decision.entries] == [["a"]]
    assert decision.left_out == ["add on CPU: 1048576 elements: the rows of every plugin failed"]


def test_a_preset_the_registry_does_not_have_is_left_out():
    rows = [*two_sizes(), _row("add", "a", "9G_elements", 1.0), _row("add", "b", "9G_elements", 0.1)]
    decision = _decision(rows, ("a", "b"))
    assert [[(b.get("up_to"), b["plugin"]) for b in e["buckets"]] for e in decision.entries] == \
        [[(4096, "a"), (None, "b")]]
    assert decision.left_out == ["add on CPU: preset 9G_elements (float32): not a bench preset of add in this "
                                 "registry, so its size is unknown"]


def test_an_op_with_no_size_decided_gets_no_entry():
    rows = [_row("add", "a", "4K_elements", 1.0), _row("add", "b", "1M_elements", 1.0)]
    decision = _decision(rows, ("a", "b"))
    assert decision.entries == []
    assert decision.left_out == ["add on CPU: 4096 elements: no row of b at 4K_elements float32",
                                 "add on CPU: 1048576 elements: no row of a at 1M_elements float32",
                                 "add on CPU: no size decided, so the file has no entry for it"]


def test_times_far_apart_are_compared_without_overflow():
    # finite and > 0, as the reader lets through: their ratio is not a finite number
    rows = [_row("add", "a", "4K_elements", 1e300), _row("add", "b", "4K_elements", 1e-300),
            _row("add", "a", "1M_elements", 1e-300), _row("add", "b", "1M_elements", 1e300)]
    assert [(b.get("up_to"), b["plugin"]) for b in _decide(rows, ("a", "b"))[0]["buckets"]] == \
        [(4096, "b"), (None, "a")]


def _tune(tmp_path, *args):
    return subprocess.run([str(BACKPLANE), "tune", "--plugin-dir", str(FIXTURES), *args], capture_output=True,
                          text=True, env=child_env(), timeout=600, cwd=tmp_path)


def test_tune_refuses_fewer_than_two_plugins(tmp_path):
    r = _tune(tmp_path, "--backends", "cpu")
    assert r.returncode == 2 and "expected two or more plugins to choose among, found 'cpu'" in r.stderr


def test_tune_decides_from_an_earlier_run_and_the_core_reads_the_file_back(tmp_path):
    # Figures given (--from-json), so the decision is exact: cpu_alt, loaded first, keeps
    # 4K (where it is not slower), cpu takes 1M (5x faster there).
    figures = tmp_path / "run.json"
    rows = [_row("add", "cpu_alt", "4K_elements", 2.0), _row("add", "cpu", "4K_elements", 2.0),
            _row("add", "cpu_alt", "1M_elements", 500.0), _row("add", "cpu", "1M_elements", 100.0)]
    figures.write_text(json.dumps({"context": _context("cpu_alt", "cpu"), "benchmarks": rows}))
    out = tmp_path / "sel.yaml"
    r = _tune(tmp_path, "--backends", "cpu_alt,cpu", "--from-json", str(figures), "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "add              CPU          up to 4096: cpu_alt, larger: cpu" in r.stdout, r.stdout
    assert f'made_by: {{command: "backplane tune --backends cpu_alt,cpu --from-json {figures}' in out.read_text()
    check = f"""
import warnings, torch, backplane
warnings.simplefilter("ignore")
backplane.load("cpu_alt", path={str(FIXTURES)!r})
backplane.load("cpu", selection={str(out)!r})
(s,) = [s for s in backplane.serving() if s.op == "add"]
assert s.buckets == ((4096, "cpu_alt"), (None, "cpu")), s
print("ok")
"""
    done = run_python(check)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_tune_refuses_a_from_json_file_that_is_not_the_engines(tmp_path):
    (tmp_path / "notes.json").write_text('{"rows": []}')
    for given, found in [(tmp_path / "notes.json", 'no "benchmarks" list'),
                         (tmp_path / "absent.json", "No such file or directory")]:
        r = _tune(tmp_path, "--backends", "cpu_alt,cpu", "--from-json", str(given))
        assert r.returncode == 2, r.stdout
        assert "backplane tune: --from-json: expected the benchmark engine's JSON, found: " in r.stderr, r.stderr
        assert found in r.stderr and str(given) in r.stderr, r.stderr
    assert not (tmp_path / "backplane_selection.yaml").exists()


def test_tune_times_each_plugin_at_every_size_and_keeps_the_figures(tmp_path):
    # The engine run itself. Which plugin wins is the machine's to say (a busy CI machine
    # can flip a close size), so this checks what is exact: both plugins timed and checked
    # at both sizes, every size decided for one of them, the figures in the file and in
    # the JSON kept with --json, which --from-json then decides from alike.
    out, kept = tmp_path / "sel.yaml", tmp_path / "run.json"
    r = _tune(tmp_path, "--backends", "cpu_alt,cpu", "--ops", "add", "--shapes", "4K_elements,1M_elements",
              "--min-time", "0.02", "--max-time", "0.2", "--json", str(kept), "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("add ")]
    assert re.fullmatch(r"add +CPU +(every size: (cpu_alt|cpu)|up to 4096: (cpu_alt|cpu), larger: (cpu_alt|cpu))",
                        line), line
    timed = {(row.backend, row.shape) for row in bench_rows(json.loads(kept.read_text()))
             if row.op == "add" and row.impl == "backplane" and not row.error and row.times_us}
    assert timed == {(b, s) for b in ("cpu_alt", "cpu") for s in ("4K_elements", "1M_elements")}, timed
    text = out.read_text()
    for preset in ("4K_elements", "1M_elements"):
        m = re.search(rf'{{preset: "{preset}", dtype: "float32", elements: \d+, median_us: {{([^}}]*)}}', text)
        assert m and sorted(t.split(": ")[0] for t in m.group(1).split(", ")) == ['"cpu"', '"cpu_alt"'], text
    again = _tune(tmp_path, "--backends", "cpu_alt,cpu", "--from-json", str(kept), "--out", str(tmp_path / "b.yaml"))
    assert again.returncode == 0 and line in again.stdout.splitlines(), (line, again.stdout, again.stderr)


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU (the GPU machine)")
def test_tune_between_two_cuda_plugins(tmp_path):
    # cuda_alt (tests/fixtures/cuda_alt_plugin.cpp) adds on 16 blocks only: within 2x of cuda's
    # kernel for 4K elements (both one small launch), 20x slower and more from 1M on. The
    # margin is set so that only the by-construction gap moves a size: cuda_alt, loaded
    # first, keeps 4K; cuda takes the rest. (At the default margin cuda, with its vectorized
    # loads, takes every size: bench/results/compile-backward.md.)
    if not (FIXTURES / "libbackplane_cuda_alt.so").is_file():
        pytest.skip("the cuda_alt fixture is built with the CUDA plugin only")
    out = tmp_path / "sel.yaml"
    r = _tune(tmp_path, "--backends", "cuda_alt,cuda", "--ops", "add", "--shapes", "4K_elements,1M_elements",
              "--cuda-graph", "--margin", "90", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "add              CUDA         up to 4096: cuda_alt, larger: cuda" in r.stdout, (r.stdout, out.read_text())
    check = f"""
import warnings, torch, backplane
warnings.simplefilter("ignore")
backplane.load("cuda_alt", path={str(FIXTURES)!r})
backplane.load("cuda", selection={str(out)!r})
(s,) = [s for s in backplane.serving() if s.op == "add" and s.dispatch_key == "CUDA"]
assert s.serving == "cuda_alt<=4096,cuda", s
for n in (4096, 4097, 1 << 20):
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    torch.testing.assert_close(torch.ops.backplane.add(a, b), a + b)
print("ok")
"""
    done = run_python(check)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]
