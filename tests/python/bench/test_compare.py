"""`backplane bench` comparisons and result files: the U test and the regression exit
code, runs side by side, and every way a result file can be refused (missing, malformed,
cut off, of another timing, written over the baseline). Most read made-up runs
(bench_runs.py); the rest time one tiny row."""
import json
import os
import subprocess
from pathlib import Path

import pytest

import backplane
from backplane import bench
from bench_runs import fake_entries, fake_run, no_run

CLI = backplane.lib_dir().parent / "bin" / "backplane"
QUICK = ["--min-time=0.01"]

pytestmark = pytest.mark.skipif(not (backplane.lib_dir().parent / "bin" / "backplane_bench").is_file(),
                                reason="backplane_bench not built (BACKPLANE_BUILD_BENCH=OFF)")

_ROW = "add/cpu/backplane/1M_elements_float32"


def _one_entry(**fields):
    """A compare file of one entry, as text (json.dumps writes NaN for a float nan)."""
    return json.dumps({"benchmarks": [{"name": _ROW, **fields}]})


def test_u_test_p_values():
    assert bench.mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(0.01219, abs=1e-4)
    assert bench.mann_whitney_p([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    assert bench.mann_whitney_p([1, 2], [3, 4]) is None  # too few to say anything


def test_compare_flags_a_significant_regression_and_sets_the_exit_code(tmp_path):
    base, slow = tmp_path / "base.json", tmp_path / "slow.json"
    base.write_text(json.dumps(fake_run((5.0, 5.1, 5.2, 5.0, 5.1))))
    slow.write_text(json.dumps(fake_run((6.0, 6.1, 6.2, 6.0, 6.1))))
    lines = bench.compare(bench.load(base), bench.load(slow))
    (backplane_line,) = [c for c in lines if c["impl"] == "backplane"]
    assert backplane_line["regressed"] and backplane_line["p"] < 0.05
    assert bench.main(["--input", str(slow), "--compare", str(base)]) == 1
    assert bench.main(["--input", str(base), "--compare", str(base)]) == 0
    # within the threshold: not a regression, however significant
    assert bench.main(["--input", str(slow), "--compare", str(base), "--threshold", "30"]) == 0


def test_runs_of_different_backends_side_by_side(tmp_path, capsys):
    cpu, npu = tmp_path / "cpu.json", tmp_path / "npu.json"
    cpu.write_text(json.dumps(fake_run((5.0, 6.0, 7.0), backend="cpu")))
    npu_run = fake_run((20.0, 20.0, 20.0), backend="npu")
    npu_run["context"].update(host_name="vm", cpu_model="Example CPU @ 2.10GHz")
    npu.write_text(json.dumps(npu_run))
    merged = bench.merge({"cpu.json": bench.load(cpu), "npu.json": bench.load(npu)})
    assert {t["backend"] for t in bench.table(merged)} == {"cpu", "npu"}
    assert bench.main(["--input", str(cpu), str(npu), "--side-by-side"]) == 0
    printed = capsys.readouterr().out
    assert ("| op | preset | dtype | cpu µs | cpu mode | cpu % copy_ | cpu % peak | cpu × ref | npu µs | npu mode | "
            "npu % copy_ | npu % peak | npu × ref |") in printed
    # one line for the workload, each backend's median, mode, copy fraction, peak fraction (none: the run
    # gives no FLOPs) and ratio in it
    assert "| add | 1M_elements | float32 | 6.00 | eager | 50% | - | 1.67 | 20.00 | eager | 50% | - | 0.50 |" in printed
    # each run's machine: its CPU model where the run recorded one
    assert f"- {cpu}: machine `?`, ? CPUs" in printed
    assert f"- {npu}: machine `vm` (Example CPU @ 2.10GHz), ? CPUs" in printed
    # the merged context's machine is the first run's, host name and CPU model alike
    assert bench.machine(merged["context"]) == "`?`"
    assert bench.machine(bench.merge({"npu.json": bench.load(npu), "cpu.json": bench.load(cpu)})["context"]) == \
        "`vm` (Example CPU @ 2.10GHz)"
    # the command that makes this table again, not one that would print something else
    assert f"Command: `backplane bench --input {cpu} {npu} --side-by-side`" in printed


def test_a_backend_in_two_runs_is_refused_naming_both(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(fake_run((5.0, 5.0, 5.0))))
    b.write_text(json.dumps(fake_run((6.0, 6.0, 6.0))))
    with pytest.raises(ValueError, match=r"backend 'cpu' is in both a.json and b.json"):
        bench.merge({"a.json": bench.load(a), "b.json": bench.load(b)})
    assert bench.main(["--input", str(a), str(b)]) == 2
    assert "backend 'cpu' is in both" in capsys.readouterr().err


def test_a_run_cut_off_mid_row_keeps_its_complete_rows(tmp_path, capsys):
    whole = json.dumps(fake_run((5.0, 6.0, 7.0)), indent=2)
    cut = tmp_path / "cut.json"
    # as Google Benchmark leaves a file when the engine is stopped: inside the last entry
    cut.write_text(whole[:whole.rindex('"time_unit"')])
    results = bench.load(cut)
    assert len(results["benchmarks"]) == len(json.loads(whole)["benchmarks"]) - 1
    assert "ends mid-run" in capsys.readouterr().err
    (tmp_path / "junk.json").write_text("not json")
    with pytest.raises(ValueError, match="not a backplane bench"):
        bench.load(tmp_path / "junk.json")


def test_runs_timed_differently_are_not_compared(tmp_path, capsys):
    eager, graphs = fake_run((5.0, 5.0, 5.0), backend="cuda"), fake_run((2.0, 2.0, 2.0), backend="cuda")
    for entry in graphs["benchmarks"]:
        entry["cuda_graph"] = 1
    assert all(r.cuda_graph for r in bench.rows(graphs)) and not any(r.cuda_graph for r in bench.rows(eager))
    with pytest.raises(ValueError, match="add/backplane/1M_elements/float32 on cuda / cuda: the base run timed it as "
                                         r"eager calls, the new one as CUDA graph replays \(--cuda-graph\)"):
        bench.compare(eager, graphs)
    # two backends of one run, one of them graph-timed: said as such
    both = {"context": {}, "benchmarks": graphs["benchmarks"] + [
        dict(e, name=e["name"].replace("/cuda/", "/cpu/"), run_name=e["run_name"].replace("/cuda/", "/cpu/"))
        for e in eager["benchmarks"]]}
    with pytest.raises(ValueError, match=r"cpu timed as eager calls, cuda as CUDA graph replays \(--cuda-graph\); "
                                         "--cuda-graph times cuda rows only"):
        bench.compare(both, both, base_backend="cpu", new_backend="cuda")
    base, new = tmp_path / "eager.json", tmp_path / "graphs.json"
    base.write_text(json.dumps(eager))
    new.write_text(json.dumps(graphs))
    assert bench.main(["--input", str(new), "--compare", str(base)]) == 2
    assert "run both the same way" in capsys.readouterr().err


def test_a_missing_or_broken_base_file_is_an_error_message(tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text(json.dumps(fake_run((5.0, 5.0, 5.0))))
    assert bench.main(["--input", str(run), "--compare", str(tmp_path / "absent.json")]) == 2
    assert "absent.json" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{not json")
    assert bench.main(["--input", str(run), "--compare", str(tmp_path / "broken.json")]) == 2
    assert "broken.json: not a backplane bench (Google Benchmark) JSON file" in capsys.readouterr().err


def test_json_onto_the_compare_baseline_is_refused_before_running(tmp_path, monkeypatch, capsys):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(fake_run((5.0, 5.1, 5.2))))
    kept = base.read_text()
    monkeypatch.setattr(bench, "run", no_run)
    # the same file under another spelling
    same = tmp_path / "sub" / ".." / "base.json"
    (tmp_path / "sub").mkdir()
    assert bench.main(["--backends", "cpu", "--ops", "add", "--json", str(same), "--compare", str(base)]) == 2
    assert f"--json {same} would overwrite the --compare baseline {base}" in capsys.readouterr().err
    assert base.read_text() == kept
    # another --json: the baseline is read before the run, so a broken one costs no timing
    (tmp_path / "broken.json").write_text("[]")
    assert bench.main(["--ops", "add", "--json", str(tmp_path / "new.json"),
                       "--compare", str(tmp_path / "broken.json")]) == 2
    assert "broken.json: the top level is a list, not an object" in capsys.readouterr().err


def test_cli_json_onto_the_compare_baseline_keeps_the_baseline(tmp_path):
    import sys

    base = tmp_path / "base.json"
    base.write_text(json.dumps(fake_run((5.0, 5.1, 5.2))))
    kept = base.read_text()
    env = {**os.environ, "BACKPLANE_PYTHON": sys.executable}
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "add", "--json", str(base), "--compare",
                           str(base)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "would overwrite the --compare baseline" in done.stderr and base.read_text() == kept


def test_compare_backends_not_in_the_run_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "run", no_run)
    assert bench.main(["--backends", "cpu", "--ops", "add", "--compare-backends", "cpu,nope"]) == 2
    assert "--compare-backends: nope not among --backends (cpu)" in capsys.readouterr().err
    # read back: the run has no row of it (a backend skipped by the engine, say)
    run = tmp_path / "run.json"
    run.write_text(json.dumps(fake_run((5.0, 5.0, 5.0))))
    assert bench.main(["--input", str(run), "--compare-backends", "cpu,nope"]) == 2
    assert "--compare-backends: this run has no timed row on nope; its backends: cpu" in capsys.readouterr().err


def test_compare_with_no_common_row_is_refused(tmp_path, capsys):
    run, empty, other = tmp_path / "run.json", tmp_path / "empty.json", tmp_path / "other.json"
    run.write_text(json.dumps(fake_run((5.0, 5.0, 5.0))))
    empty.write_text(json.dumps({"context": {}, "benchmarks": []}))
    other.write_text(json.dumps(fake_run((5.0, 5.0, 5.0), backend="npu")))
    assert bench.main(["--input", str(run), "--compare", str(empty)]) == 2
    assert f"--compare {empty}: no row is timed in both runs (0 timed there, 3 in this run)" in capsys.readouterr().err
    assert bench.main(["--input", str(run), "--compare", str(other)]) == 2
    assert f"--compare {other}: no row is timed in both runs (3 timed there, 3 in this run)" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("[]", "the top level is a list, not an object"),
    ("null", "the top level is null, not an object"),
    ("{}", 'no "benchmarks" list'),
    ('{"benchmarks": {"benchmarks": []}}', '"benchmarks" is an object, not a list'),
    ('{"benchmarks": [[1.0]]}', "benchmarks[0] is a list, not an object"),
    ('{"context": [], "benchmarks": []}', '"context" is a list, not an object'),
    ('{"benchmarks": [{"real_time": 5.0}]}', 'benchmarks[0] has no "name" string'),
    (_one_entry(real_time="5.0"), f"benchmarks[0] ({_ROW}): real_time '5.0' is not a time > 0"),
    (_one_entry(real_time=5.0, time_unit="h"), f"benchmarks[0] ({_ROW}): time_unit 'h' is not one of ns, us, ms, s"),
    (_one_entry(real_time=0), f"benchmarks[0] ({_ROW}): real_time 0 is not a time > 0"),
    (_one_entry(real_time=float("nan")), f"benchmarks[0] ({_ROW}): real_time nan is not a time > 0"),
    (_one_entry(real_time=5.0, bytes_per_second="x"),
     f"benchmarks[0] ({_ROW}): bytes_per_second 'x' is not a rate >= 0"),
])
def test_a_malformed_compare_file_is_refused_naming_the_file(text, message, tmp_path, capsys):
    run, base = tmp_path / "run.json", tmp_path / "base.json"
    run.write_text(json.dumps(fake_run((5.0, 5.0, 5.0))))
    base.write_text(text)
    assert bench.main(["--input", str(run), "--compare", str(base)]) == 2
    assert f"backplane bench: {base}: {message}" in capsys.readouterr().err


def test_a_device_file_is_not_read_without_end(tmp_path, capsys):
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    run = tmp_path / "run.json"
    run.write_text(json.dumps(fake_run((5.0, 5.0, 5.0))))
    assert bench.main(["--input", str(run), "--compare", "/dev/zero"]) == 2
    assert "/dev/zero: more than 64 MiB; not a backplane bench JSON file" in capsys.readouterr().err


def test_a_comparison_times_enough_repetitions_for_its_u_test(tmp_path, monkeypatch, capsys):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(fake_run((5.0, 5.1, 5.2))))
    seen = []
    monkeypatch.setattr(bench, "run", lambda *a, **k: seen.append(a[4]) or bench.load(base))
    bench.main(["--backends", "cpu"])
    bench.main(["--backends", "cpu", "--compare", str(base)])
    bench.main(["--backends", "cpu", "--compare", str(base), "--repetitions", "2"])
    assert seen == [1, 5, 2]
    # one repetition a row (a default run as the baseline): said, not silently never a regression
    single = tmp_path / "single.json"
    single.write_text(json.dumps(fake_run((9.0,), (10.0,))))
    capsys.readouterr()
    assert bench.main(["--input", str(single), "--compare", str(base)]) == 0
    assert "p n/a: fewer than 3 repetitions of the row in a run" in capsys.readouterr().out


def _with_compiled(times_backplane, times_compiled):
    run = fake_run(times_backplane)
    run["benchmarks"] += fake_entries("add/cpu/compiled/1M_elements_float32", times_compiled)
    return run


def test_x_compile_is_read_beyond_noise_as_compare_reads_a_regression():
    # A consistent 1% (significant to the U test alone) is within the threshold; 20% is not.
    assert bench.compile_reading(_with_compiled((5.0, 5.01, 5.02, 5.0, 5.01), (4.95, 4.96, 4.97, 4.95, 4.96))) == (
        "x compile: more than 5% apart with p < 0.05 (the U test on the repetitions, as --compare)\n"
        "  within 5% or noise: add 1M_elements float32 cpu (eager)")
    slower = bench.compile_reading(_with_compiled((6.0, 6.1, 6.2, 6.0, 6.1), (5.0, 5.1, 5.2, 5.0, 5.1)))
    assert slower.endswith("\n  slower: add 1M_elements float32 cpu (eager)"), slower
    faster = _with_compiled((5.0, 5.1, 5.2, 5.0, 5.1), (6.0, 6.1, 6.2, 6.0, 6.1))
    assert bench.compile_reading(faster).endswith("\n  faster: add 1M_elements float32 cpu (eager)")
    within = bench.compile_reading(faster, 0.3)
    assert within.endswith("\n  within 30% or noise: add 1M_elements float32 cpu (eager)"), within
    # 20% apart on 3 repetitions each: the U test cannot reach 0.05 with so few, so no reading at all.
    assert bench.compile_reading(_with_compiled((6.0, 6.1, 6.2), (5.0, 5.1, 5.2))) == ""
    assert bench.compile_reading(fake_run((5.0, 5.1, 5.2, 5.0))) == ""  # no compiled row: nothing to read
