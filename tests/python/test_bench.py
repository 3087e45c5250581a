"""`backplane bench`: the engine's selection flags, the correctness check before timing,
the table, the JSON, comparisons with the U test and the regression exit code. Runs
are tiny (one op, one preset, a few repetitions at a short minimum time): these test
the command, not the speed."""
import json
import os
import subprocess
from pathlib import Path

import pytest

import backplane
from backplane import bench

ROOT = Path(__file__).resolve().parents[2]
CLI = backplane.lib_dir().parent / "bin" / "backplane"
FIXTURES = backplane.lib_dir().parent / "tests" / "fixtures"
QUICK = ["--min-time=0.01"]

pytestmark = pytest.mark.skipif(not (backplane.lib_dir().parent / "bin" / "backplane_bench").is_file(),
                                reason="backplane_bench not built (BACKPLANE_BUILD_BENCH=OFF)")


def _entry(name, times, bytes_per_second=1e9, error=None):
    if error:  # Google Benchmark writes one entry for a row that failed
        return [{"name": name, "run_name": name, "run_type": "iteration", "error_occurred": True,
                 "error_message": error, "real_time": 0, "time_unit": "us"}]
    rows = []
    for t in times:
        rows.append({"name": name, "run_name": name, "run_type": "iteration", "real_time": t, "time_unit": "us",
                     "bytes_per_second": bytes_per_second})
    return rows


def _results(times_backplane, times_reference=(10.0, 10.0, 10.0), backend="cpu", error=None):
    return {"context": {f"backend.{backend}": "/x/libbackplane_cpu.so (version 0.1.0, key CPU, device cpu)"},
            "benchmarks": _entry(f"add/{backend}/backplane/1M_elements_float32", times_backplane, 2e9, error)
            + _entry(f"add/{backend}/reference/1M_elements_float32", times_reference, 1e9)
            + _entry(f"add/{backend}/copy_/1M_elements_float32", (4.0, 4.0, 4.0), 4e9)}


def test_u_test_p_values():
    assert bench.mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(0.01219, abs=1e-4)
    assert bench.mann_whitney_p([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    assert bench.mann_whitney_p([1, 2], [3, 4]) is None  # too few to say anything


def test_table_ratios_and_copy_fraction():
    (row,) = bench.table(_results((5.0, 6.0, 7.0)))
    assert row["median_us"] == 6.0
    assert row["spread"] == pytest.approx(1 / 6)
    assert row["vs_reference"] == pytest.approx(10 / 6)
    assert row["pct_copy"] == pytest.approx(0.5)
    assert row["plugin"] == "/x/libbackplane_cpu.so"


def test_compare_flags_a_significant_regression_and_sets_the_exit_code(tmp_path):
    base, slow = tmp_path / "base.json", tmp_path / "slow.json"
    base.write_text(json.dumps(_results((5.0, 5.1, 5.2, 5.0, 5.1))))
    slow.write_text(json.dumps(_results((6.0, 6.1, 6.2, 6.0, 6.1))))
    lines = bench.compare(bench.load(base), bench.load(slow))
    (backplane_line,) = [c for c in lines if c["impl"] == "backplane"]
    assert backplane_line["regressed"] and backplane_line["p"] < 0.05
    assert bench.main(["--input", str(slow), "--compare", str(base)]) == 1
    assert bench.main(["--input", str(base), "--compare", str(base)]) == 0
    # within the threshold: not a regression, however significant
    assert bench.main(["--input", str(slow), "--compare", str(base), "--threshold", "30"]) == 0


def test_a_failed_row_is_reported_not_timed():
    (row,) = bench.table(_results((), error="wrong result against the reference, not timed: 3 of 4 differ"))
    assert row["error"].startswith("wrong result")
    assert "FAILED: wrong result" in bench.format_table(_results((), error="wrong result against the reference"))


def test_engine_run_selects_rows_and_checks_results(tmp_path):
    results = bench.run("cpu", ops="add", dtypes="float32", shapes="1M_elements", repetitions=3,
                        json_path=tmp_path / "r.json", quiet=True, extra=QUICK)
    names = {(r.op, r.backend, r.impl, r.shape, r.dtype) for r in bench.rows(results)}
    assert names == {("add", "cpu", impl, "1M_elements", "float32") for impl in ("backplane", "reference", "copy_")}
    (row,) = bench.table(results)
    assert not row["error"] and len(bench.rows(results)[0].times_us) == 3
    assert row["gbps"] > 0 and row["vs_reference"] > 0
    assert json.loads((tmp_path / "r.json").read_text())["benchmarks"], "the JSON is Google Benchmark's"


def test_a_wrong_kernel_is_reported_not_timed():
    # cpu_alt's identity_conv returns -x.
    env = {**os.environ, "BACKPLANE_PLUGIN_PATH": str(FIXTURES)}
    done = subprocess.run([str(backplane.lib_dir().parent / "bin" / "backplane_bench"), "--backends=cpu_alt",
                           "--ops=identity_conv", "--dtypes=float32", *QUICK], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("identity_conv ")]
    assert line.split()[1:4] == ["1M_elements", "float32", "cpu_alt"]
    assert "FAILED: wrong result against the reference, not timed:" in line


def test_unknown_names_are_refused_naming_the_known_ones():
    engine = str(backplane.lib_dir().parent / "bin" / "backplane_bench")
    done = subprocess.run([engine, "--ops=nosuch"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--ops: no op 'nosuch' in the registry or a loaded plugin's fragment; known: add," in done.stderr
    done = subprocess.run([engine, "--shapes=huge"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no op has a bench preset named 'huge'; presets: 1M_" in done.stderr
    assert "1M_broadcast_row, 1M_elements" in done.stderr
    done = subprocess.run([engine, "--dtypes=int8"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--dtypes: 'int8' is not one of the floating dtypes" in done.stderr


def test_cli_bench_prints_the_table_and_writes_json(tmp_path):
    out = tmp_path / "b.json"
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "mul", "--dtypes", "float32",
                           "--shapes", "1M_elements,1M_transposed", "--repetitions", "2", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [line.split()[:4] for line in done.stdout.splitlines() if line.startswith("mul ")] == \
        [["mul", "1M_elements", "float32", "cpu"], ["mul", "1M_transposed", "float32", "cpu"]]
    assert "x base" in done.stdout
    assert {r.impl for r in bench.rows(bench.load(out))} == {"backplane", "reference", "copy_"}
    # the machine beside its host name: /proc/cpuinfo's first model name, where it has one
    models = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
              if line.startswith("model name")] if Path("/proc/cpuinfo").exists() else []
    assert bench.load(out)["context"].get("cpu_model") == (models[0] if models and models[0] else None)


def test_interleave_reaches_the_engine_from_both_commands(tmp_path, monkeypatch):
    # The C++ command: --interleave takes no value, and the flags after it keep theirs.
    out = tmp_path / "i.json"
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "mul", "--dtypes", "float32",
                           "--shapes", "1M_elements", "--interleave", "--repetitions", "3", "--json", str(out),
                           *QUICK[0].split("=")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = bench.rows(bench.load(out))
    assert {r.impl for r in rows} == {"backplane", "reference", "copy_"} and all(len(r.times_us) == 3 for r in rows)
    # The Python command hands the engine Google Benchmark's flag.
    seen = {}
    monkeypatch.setattr(bench, "run", lambda *a, **k: seen.update(k) or bench.load(out))
    assert bench.main(["--backends", "cpu", "--interleave"]) == 0
    assert "--benchmark_enable_random_interleaving=true" in seen["extra"]
    bench.main(["--backends", "cpu"])
    assert "--benchmark_enable_random_interleaving=true" not in seen["extra"]


def test_interleaved_device_rows_keep_their_batch_and_are_checked(tmp_path):
    # Interleaved, a row is built again each time it comes round. A device row's calls per
    # batch must stay what its first run chose (Google Benchmark aborted the process when
    # repetitions of a row ran different iterations); npu rows time batches as cuda's do.
    out = tmp_path / "i.json"
    done = subprocess.run([str(CLI), "bench", "--backends", "npu", "--ops", "add", "--dtypes", "float32",
                           "--shapes", "1M_elements,1M_permuted", "--interleave", "--repetitions", "3", "--json",
                           str(out), *QUICK[0].split("=")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = bench.rows(bench.load(out))
    assert len(rows) == 6 and all(len(r.times_us) == 3 for r in rows), [(r.impl, r.shape, r.times_us) for r in rows]
    assert {r.shape for r in rows} == {"1M_elements", "1M_permuted"}


def test_markdown_section_names_machine_torch_date_and_command():
    results = _results((5.0, 6.0, 7.0))
    results["context"].update(host_name="box", num_cpus=2, torch_version="2.14.1", date="2026-11-23T10:00:00")
    text = bench.markdown(results, "backplane bench --ops add")
    assert "Machine `box`, 2 CPUs; torch 2.14.1" in text and "(2026-11-23)" in text
    results["context"]["cpu_model"] = "Example CPU @ 2.10GHz"
    assert "Machine `box` (Example CPU @ 2.10GHz), 2 CPUs;" in bench.markdown(results)
    assert "Command: `backplane bench --ops add`" in text
    assert "| add | cpu | 1M_elements | float32 | 6.00 | ±16.7% | 2.0 | 50% | 1.67 |" in text


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    bench.plot(_results((5.0, 6.0, 7.0)), tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_runs_of_different_backends_side_by_side(tmp_path, capsys):
    cpu, npu = tmp_path / "cpu.json", tmp_path / "npu.json"
    cpu.write_text(json.dumps(_results((5.0, 6.0, 7.0), backend="cpu")))
    npu_run = _results((20.0, 20.0, 20.0), backend="npu")
    npu_run["context"].update(host_name="vm", cpu_model="Example CPU @ 2.10GHz")
    npu.write_text(json.dumps(npu_run))
    merged = bench.merge({"cpu.json": bench.load(cpu), "npu.json": bench.load(npu)})
    assert {t["backend"] for t in bench.table(merged)} == {"cpu", "npu"}
    assert bench.main(["--input", str(cpu), str(npu), "--side-by-side"]) == 0
    printed = capsys.readouterr().out
    assert "| op | preset | dtype | cpu µs | cpu % copy_ | cpu × ref | npu µs | npu % copy_ | npu × ref |" in printed
    # one line for the workload, each backend's median, copy fraction and ratio in it
    assert "| add | 1M_elements | float32 | 6.00 | 50% | 1.67 | 20.00 | 50% | 0.50 |" in printed
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
    a.write_text(json.dumps(_results((5.0, 5.0, 5.0))))
    b.write_text(json.dumps(_results((6.0, 6.0, 6.0))))
    with pytest.raises(ValueError, match=r"backend 'cpu' is in both a.json and b.json"):
        bench.merge({"a.json": bench.load(a), "b.json": bench.load(b)})
    assert bench.main(["--input", str(a), str(b)]) == 2
    assert "backend 'cpu' is in both" in capsys.readouterr().err


def test_a_run_cut_off_mid_row_keeps_its_complete_rows(tmp_path, capsys):
    whole = json.dumps(_results((5.0, 6.0, 7.0)), indent=2)
    cut = tmp_path / "cut.json"
    # as Google Benchmark leaves a file when the engine is stopped: inside the last entry
    cut.write_text(whole[:whole.rindex('"time_unit"')])
    results = bench.load(cut)
    assert len(results["benchmarks"]) == len(json.loads(whole)["benchmarks"]) - 1
    assert "ends mid-run" in capsys.readouterr().err
    (tmp_path / "junk.json").write_text("not json")
    with pytest.raises(ValueError, match="not a backplane bench"):
        bench.load(tmp_path / "junk.json")


def test_cuda_graph_without_a_cuda_backend_is_refused_before_any_row():
    engine = str(backplane.lib_dir().parent / "bin" / "backplane_bench")
    done = subprocess.run([engine, "--backends=cpu", "--ops=add", "--cuda-graph"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stdout[-2000:]
    assert "--cuda-graph: no selected backend runs on a CUDA device; selected: cpu (cpu)" in done.stderr
    # the C++ command hands the flag on (it takes no value: the flags after it keep theirs)
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--cuda-graph", "--ops", "add"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no selected backend runs on a CUDA device" in done.stderr
    # from Python: the engine's refusal is an exit code, not a traceback
    assert bench.main(["--backends", "cpu", "--cuda-graph", "--ops", "add"]) == 2


def test_cuda_graph_reaches_the_engine_from_python(monkeypatch, tmp_path):
    out = tmp_path / "r.json"
    out.write_text(json.dumps(_results((5.0, 5.0, 5.0))))
    seen = {}
    real_run = bench.run
    monkeypatch.setattr(bench, "run", lambda *a, **k: seen.update(k) or bench.load(out))
    assert bench.main(["--backends", "cuda", "--cuda-graph"]) == 0
    assert seen["cuda_graph"] is True
    bench.main(["--backends", "cuda"])
    assert seen["cuda_graph"] is False
    # run() hands the engine the flag (the engine itself is not started here)
    monkeypatch.setattr(bench, "run", real_run)
    argv = []

    def engine_stub(args, **kwargs):
        argv.extend(args)
        Path([a for a in args if a.startswith("--benchmark_out=")][0].split("=", 1)[1]).write_text(out.read_text())
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(bench.subprocess, "run", engine_stub)
    bench.run("cuda", cuda_graph=True)
    assert "--cuda-graph" in argv and "--backends=cuda" in argv
    argv.clear()
    bench.run("cuda")
    assert argv and "--cuda-graph" not in argv


def test_runs_timed_differently_are_not_compared(tmp_path, capsys):
    eager, graphs = _results((5.0, 5.0, 5.0), backend="cuda"), _results((2.0, 2.0, 2.0), backend="cuda")
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


def _why_no_cuda_rows():
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device in this process"
    if not (backplane.lib_dir() / "backplane_bench_cuda_graph.so").is_file():
        return "this build has no CUDA plugin (nor the --cuda-graph module)"
    return ""


@pytest.mark.skipif(bool(_why_no_cuda_rows()), reason=_why_no_cuda_rows() or "runs")
def test_cuda_graph_rows_are_checked_then_timed_as_replays(tmp_path):
    out = tmp_path / "g.json"
    done = subprocess.run([str(CLI), "bench", "--backends", "cuda", "--ops", "add,rms_norm_backward", "--dtypes",
                           "float32", "--shapes", "1M_elements,decode_32x8192", "--cuda-graph", "--repetitions", "2",
                           "--no-compile", "--json", str(out), *QUICK[0].split("=")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = bench.rows(bench.load(out))
    assert {(r.op, r.impl) for r in rows} == {(op, impl) for op in ("add", "rms_norm_backward")
                                             for impl in ("backplane", "reference", "copy_")}
    assert all(r.cuda_graph and not r.error and len(r.times_us) == 2 and min(r.times_us) > 0 for r in rows), rows
    assert "CUDA graph replays" in bench.load(out)["context"]["timing"]


@pytest.mark.skipif(bool(_why_no_cuda_rows()), reason=_why_no_cuda_rows() or "runs")
def test_cuda_graph_without_its_module_names_the_file(tmp_path):
    # An engine whose lib/ has no module (a copy elsewhere): refused before any row runs.
    (tmp_path / "bin").mkdir()
    engine = tmp_path / "bin" / "backplane_bench"
    engine.write_bytes((backplane.lib_dir().parent / "bin" / "backplane_bench").read_bytes())
    engine.chmod(0o755)
    done = subprocess.run([str(engine), "--backends=cuda", "--ops=add", "--cuda-graph"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert f"--cuda-graph: cannot load {tmp_path / 'lib' / 'backplane_bench_cuda_graph.so'}" in done.stderr


def test_a_missing_or_broken_base_file_is_an_error_message(tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_results((5.0, 5.0, 5.0))))
    assert bench.main(["--input", str(run), "--compare", str(tmp_path / "absent.json")]) == 2
    assert "absent.json" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{not json")
    assert bench.main(["--input", str(run), "--compare", str(tmp_path / "broken.json")]) == 2
    assert "broken.json: not a backplane bench (Google Benchmark) JSON file" in capsys.readouterr().err


def _no_run(*args, **kwargs):
    raise AssertionError("the engine ran although the flags were refused")


def test_json_onto_the_compare_baseline_is_refused_before_running(tmp_path, monkeypatch, capsys):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(_results((5.0, 5.1, 5.2))))
    kept = base.read_text()
    monkeypatch.setattr(bench, "run", _no_run)
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
    base.write_text(json.dumps(_results((5.0, 5.1, 5.2))))
    kept = base.read_text()
    env = {**os.environ, "BACKPLANE_PYTHON": sys.executable}
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "add", "--json", str(base), "--compare",
                           str(base)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "would overwrite the --compare baseline" in done.stderr and base.read_text() == kept


def test_cli_python_side_runs_the_builds_python_without_backplane_python(tmp_path):
    # PATH without python3: only the interpreter the build recorded can reach the Python side
    # (the tests run under it), which refuses the --json that would overwrite the baseline.
    base = tmp_path / "base.json"
    base.write_text(json.dumps(_results((5.0, 5.1, 5.2))))
    env = {k: v for k, v in os.environ.items() if k != "BACKPLANE_PYTHON"}
    env["PATH"] = str(tmp_path)
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "add", "--json", str(base), "--compare",
                           str(base)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "would overwrite the --compare baseline" in done.stderr, done.stderr[-2000:]


def test_cli_names_the_python_it_cannot_run(tmp_path):
    missing = tmp_path / "no-python"
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "add", "--side-by-side"],
                          capture_output=True, text=True, env={**os.environ, "BACKPLANE_PYTHON": str(missing)},
                          timeout=60)
    assert done.returncode == 1
    assert (f"backplane bench: cannot run {missing} (the Python for --compare/--plot/--side-by-side and the "
            "torch.compile rows, chosen as BACKPLANE_PYTHON; set BACKPLANE_PYTHON to a Python with torch): No such file or directory") in done.stderr


@pytest.mark.parametrize("flags, message", [
    (["--repetitions", "-1"], "argument --repetitions: expected a whole number from 1 to 1000, found '-1'"),
    (["--repetitions", "0"], "argument --repetitions: expected a whole number from 1 to 1000, found '0'"),
    (["--min-time", "inf"], "argument --min-time: expected seconds > 0 and at most 3600 such as 0.05, found 'inf'"),
    (["--min-time", "nan"], "argument --min-time: expected seconds > 0"),
    (["--min-time", "0"], "argument --min-time: expected seconds > 0"),
    (["--threshold", "nan"], "argument --threshold: expected a percentage >= 0 such as 5, found 'nan'"),
    (["--compare-backends", "cpu"], "argument --compare-backends: expected two different backends A,B"),
    (["--compare-backends", "cpu,cpu"], "argument --compare-backends: expected two different backends A,B"),
])
def test_python_bench_flags_out_of_range_are_usage_errors(flags, message, monkeypatch, capsys):
    monkeypatch.setattr(bench, "run", _no_run)
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--backends", "cpu", "--ops", "add", *flags])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_cli_and_engine_bench_flags_out_of_range_are_usage_errors():
    for value in ("-1", "0", "1001", "two"):
        done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "add", "--repetitions", value],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr[-2000:]
        assert f"--repetitions: expected a whole number from 1 to 1000, found '{value}'" in done.stderr
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "add", "--min-time", "inf"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--min-time: expected seconds > 0 and at most 3600" in done.stderr
    engine = str(backplane.lib_dir().parent / "bin" / "backplane_bench")
    for flag, message in [("--min-time=inf", "--min-time: expected seconds > 0 and at most 3600 such as 0.05, "
                                             "found 'inf'"),
                          ("--min-time=1e300", "found '1e300'"),
                          ("--benchmark_repetitions=-1", "--benchmark_repetitions: expected a whole number from "
                                                         "1 to 1000, found '-1'"),
                          ("--benchmark_repetitions=0", "found '0'")]:
        done = subprocess.run([engine, "--backends=cpu", "--ops=add", flag], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and message in done.stderr, (flag, done.stderr[-2000:])


def test_compare_backends_not_in_the_run_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "run", _no_run)
    assert bench.main(["--backends", "cpu", "--ops", "add", "--compare-backends", "cpu,nope"]) == 2
    assert "--compare-backends: nope not among --backends (cpu)" in capsys.readouterr().err
    # read back: the run has no row of it (a backend skipped by the engine, say)
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_results((5.0, 5.0, 5.0))))
    assert bench.main(["--input", str(run), "--compare-backends", "cpu,nope"]) == 2
    assert "--compare-backends: this run has no timed row on nope; its backends: cpu" in capsys.readouterr().err


def test_compare_with_no_common_row_is_refused(tmp_path, capsys):
    run, empty, other = tmp_path / "run.json", tmp_path / "empty.json", tmp_path / "other.json"
    run.write_text(json.dumps(_results((5.0, 5.0, 5.0))))
    empty.write_text(json.dumps({"context": {}, "benchmarks": []}))
    other.write_text(json.dumps(_results((5.0, 5.0, 5.0), backend="npu")))
    assert bench.main(["--input", str(run), "--compare", str(empty)]) == 2
    assert f"--compare {empty}: no row is timed in both runs (0 timed there, 3 in this run)" in capsys.readouterr().err
    assert bench.main(["--input", str(run), "--compare", str(other)]) == 2
    assert f"--compare {other}: no row is timed in both runs (3 timed there, 3 in this run)" in capsys.readouterr().err


_ROW = "add/cpu/backplane/1M_elements_float32"


def _one_entry(**fields):
    """A compare file of one entry, as text (json.dumps writes NaN for a float nan)."""
    return json.dumps({"benchmarks": [{"name": _ROW, **fields}]})


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
    run.write_text(json.dumps(_results((5.0, 5.0, 5.0))))
    base.write_text(text)
    assert bench.main(["--input", str(run), "--compare", str(base)]) == 2
    assert f"backplane bench: {base}: {message}" in capsys.readouterr().err


def test_a_device_file_is_not_read_without_end(tmp_path, capsys):
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_results((5.0, 5.0, 5.0))))
    assert bench.main(["--input", str(run), "--compare", "/dev/zero"]) == 2
    assert "/dev/zero: more than 64 MiB; not a backplane bench JSON file" in capsys.readouterr().err


def test_outputs_that_cannot_be_written_are_errors(tmp_path, capsys):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    pytest.importorskip("matplotlib")
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_results((5.0, 6.0, 7.0))))
    assert bench.main(["--input", str(run), "--plot", "/dev/full"]) == 2
    assert "--plot /dev/full: [Errno 28] No space left on device" in capsys.readouterr().err
    # --json: a directory that is not there is refused before any row is timed
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "add", "--json",
                           str(tmp_path / "absent" / "r.json")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and f"cannot write {tmp_path / 'absent' / 'r.json'}: No such file" in done.stderr
    assert "add/cpu" not in done.stdout
    # a file that takes no data: noticed once Google Benchmark has written it (one tiny row)
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "add", "--dtypes", "float32", "--shapes",
                           "1M_elements", "--repetitions", "1", "--json", "/dev/full", *QUICK[0].split("=")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    # The reason is errno's where the C library keeps it ("No space left on device").
    assert "--benchmark_out: writing /dev/full failed: " in done.stderr


def test_markdown_reports_the_per_call_host_cost():
    # call_overhead_<op>/<backend>/<impl>/1 rows (timed when no --ops is given) are host
    # time per call, not op rows: the report shows them in a table of their own.
    results = _results((5.0, 6.0, 7.0))
    for impl, times in (("backplane", (700.0, 710.0, 720.0)), ("torch", (600.0, 590.0, 800.0))):
        results["benchmarks"] += [{"name": f"call_overhead_add/cpu/{impl}/1/real_time", "run_type": "iteration",
                                   "run_name": f"call_overhead_add/cpu/{impl}/1/real_time", "real_time": t,
                                   "time_unit": "ns"} for t in times]
    assert [(c.impl, c.median_ns) for c in bench.call_costs(results)] == [("backplane", 710.0), ("torch", 600.0)]
    assert {r.op for r in bench.rows(results)} == {"add"} and len(bench.table(results)) == 1
    text = bench.markdown(results)
    assert "| add | cpu | 710 | 600 | +110 |" in text
    assert bench.call_cost_table(_results((5.0, 6.0, 7.0))) == ""  # a run with --ops has none


def _copy_entry(op, us, nbytes=8 << 20, backend="cpu"):
    return {"name": f"{op}/{backend}/copy_/1M_elements_float32", "run_name": f"{op}/{backend}/copy_/1M_elements_float32",
            "run_type": "iteration", "real_time": us, "time_unit": "us", "bytes_per_second": nbytes / (us * 1e-6)}


def test_the_noisy_run_warning_fires_on_disagreeing_copy_rows():
    # the decision: copy_ timings of the same bytes, dtype and backend more than 30% apart
    assert bench.noisy_copy_groups([("cpu", "float32", 100, 10.0), ("cpu", "float32", 100, 12.9)]) == []
    (line,) = bench.noisy_copy_groups([("cpu", "float32", 100, 10.0), ("cpu", "float32", 100, 13.1)])
    assert line == "cpu float32 copy_ of 100 bytes: 2 timings from 10.00 to 13.10 us (31% apart, threshold 30%)"
    # timings of other sizes, dtypes or backends are no evidence against each other
    assert bench.noisy_copy_groups([("cpu", "float32", 100, 10.0), ("cpu", "float32", 200, 40.0),
                                    ("cpu", "bfloat16", 100, 40.0), ("npu", "float32", 100, 40.0)]) == []
    # from a run: two ops' copy_ rows of one 8 MiB tensor, one of them 3x slower
    def run(add_copy_us, mul_copy_us):
        return {"context": {}, "benchmarks": _entry("add/cpu/backplane/1M_elements_float32", (5.0,))
                + [_copy_entry("add", add_copy_us), _copy_entry("mul", mul_copy_us)]}

    assert "WARNING" not in bench.format_table(run(4.0, 4.4))
    (warning,) = [line for line in bench.format_table(run(4.0, 12.0)).splitlines() if line.startswith("WARNING")]
    assert warning == ("WARNING: noisy run, figures unreliable (a busy machine?): cpu float32 copy_ of 8388608 bytes: "
                       "2 timings from 4.00 to 12.00 us (200% apart, threshold 30%)")


def test_a_backend_reads_its_devices_shared_reference_and_copy_rows():
    results = _results((5.0, 6.0, 7.0))
    results["context"]["shared_rows.cpu_alt"] = "cpu"
    results["benchmarks"] += _entry("add/cpu_alt/backplane/1M_elements_float32", (3.0, 3.0, 3.0), 2e9)
    alt = [t for t in bench.table(results) if t["backend"] == "cpu_alt"][0]
    assert alt["vs_reference"] == pytest.approx(10 / 3) and alt["pct_copy"] == pytest.approx(0.5)


def _engine_json(tmp_path, *flags, env=None):
    out = tmp_path / "e.json"
    done = subprocess.run([str(backplane.lib_dir().parent / "bin" / "backplane_bench"), "--dtypes=float32",
                           f"--benchmark_out={out}", "--benchmark_out_format=json", *flags], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads(out.read_text())


def test_piped_output_is_one_table_without_escape_codes(tmp_path):
    done, results = _engine_json(tmp_path, "--backends=cpu", "--ops=add,mul", "--min-time=0.01", "--max-time=0.02")
    assert "\x1b" not in done.stdout + done.stderr and "\r" not in done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split() for line in lines if line.startswith("op ")] == [
        ["op", "preset", "dtype", "backend", "median", "spread", "GB/s", "%copy_", "x", "base"]]
    assert [line.split()[:4] for line in lines if line.startswith(("add ", "mul "))] == [
        ["add", "1M_elements", "float32", "cpu"], ["mul", "1M_elements", "float32", "cpu"]]
    # no Google Benchmark console, no formula on a line; the formulas are the JSON's labels
    assert "real_time" not in done.stdout and "DEBUG" not in done.stdout and "at::" not in done.stdout
    assert any("a + b" in e.get("label", "") or "add" in e.get("label", "") for e in results["benchmarks"])


def test_each_row_samples_between_the_minimum_and_maximum_time(tmp_path):
    _, results = _engine_json(tmp_path, "--backends=cpu", "--ops=add", "--min-time=0.06", "--max-time=0.12")
    entries = [e for e in results["benchmarks"] if not e["name"].startswith("call_overhead")]
    assert len(entries) == 3
    for e in entries:
        one_sample = e["real_time"] * 1e-6 * e["calls_per_batch"]  # a sample is never cut short
        assert 0.06 <= e["sampled_seconds"] <= 0.12 + one_sample + 0.05, e
        assert e["samples"] >= 1 and 0 <= e["spread"] and e["iterations"] == 1
    assert "for 0.06" in results["context"]["stopping"]
    # a maximum below the minimum is refused
    done = subprocess.run([str(backplane.lib_dir().parent / "bin" / "backplane_bench"), "--ops=add",
                           "--min-time=0.2", "--max-time=0.1"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--max-time: expected at least --min-time (0.2 s), found '0.1'" in done.stderr


def test_reference_and_copy_rows_are_timed_once_per_device(tmp_path):
    env = {**os.environ, "BACKPLANE_PLUGIN_PATH": str(FIXTURES)}
    _, results = _engine_json(tmp_path, "--backends=cpu,cpu_alt", "--ops=add,identity_conv", "--shapes=4K_elements,1M_elements",
                              "--min-time=0.01", "--max-time=0.02", env=env)
    add = [r for r in bench.rows(results) if r.op == "add" and r.shape == "4K_elements"]
    assert sorted((r.backend, r.impl) for r in add) == [
        ("cpu", "backplane"), ("cpu", "copy_"), ("cpu", "reference"), ("cpu_alt", "backplane")]
    assert results["context"]["shared_rows.cpu_alt"] == "cpu" and "shared_rows.cpu" not in results["context"]
    (reference,) = [r for r in add if r.impl == "reference"]
    for line in bench.table(results):  # each backend against the device's one reference and copy_
        if line["op"] == "add" and line["shape"] == "4K_elements":
            assert line["vs_reference"] == pytest.approx(reference.median_us / line["median_us"]) and line["pct_copy"]
    # Each backplane row runs its own plugin's kernel, not the one the core chose for the
    # device: cpu_alt's identity_conv (-x) fails its check; cpu's, loaded first, passes.
    ident = {r.backend: r for r in bench.rows(results) if r.op == "identity_conv" and r.impl == "backplane"}
    assert "wrong result against the reference" in ident["cpu_alt"].error and not ident["cpu"].error


def test_one_preset_per_op_by_default_and_all_for_the_sweep(tmp_path):
    quick = ["--backends=cpu", "--ops=softmax", "--min-time=0.01", "--max-time=0.01"]
    _, results = _engine_json(tmp_path, *quick)
    assert {r.shape for r in bench.rows(results)} == {"attention_4096x4096"}
    _, results = _engine_json(tmp_path, *quick, "--shapes=all")
    assert {r.shape for r in bench.rows(results)} == {"attention_4096x4096", "vocab_32x32000"}


def test_a_terminal_sees_one_progress_line_rewritten_in_place(tmp_path):
    import pty

    master, slave = pty.openpty()
    try:
        done = subprocess.run([str(backplane.lib_dir().parent / "bin" / "backplane_bench"), "--backends=cpu",
                               "--ops=add", "--dtypes=float32", "--min-time=0.01", "--max-time=0.01"],
                              stdout=subprocess.PIPE, stderr=slave, text=True, timeout=300)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert done.returncode == 0
    progress = seen.decode()
    assert "\r[1/3] add/cpu/copy_/1M_elements_float32" in progress and "\r[3/3] add/cpu/" in progress
    assert "\n" not in progress.replace("\r\n", "") and "\x1b" not in progress  # one line, no escape codes
    assert progress.endswith("\r") and "\r[" not in done.stdout  # cleared before the table


def test_a_comparison_times_enough_repetitions_for_its_u_test(tmp_path, monkeypatch, capsys):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(_results((5.0, 5.1, 5.2))))
    seen = []
    monkeypatch.setattr(bench, "run", lambda *a, **k: seen.append(a[4]) or bench.load(base))
    bench.main(["--backends", "cpu"])
    bench.main(["--backends", "cpu", "--compare", str(base)])
    bench.main(["--backends", "cpu", "--compare", str(base), "--repetitions", "2"])
    assert seen == [1, 5, 2]
    # one repetition a row (a default run as the baseline): said, not silently never a regression
    single = tmp_path / "single.json"
    single.write_text(json.dumps(_results((9.0,), (10.0,))))
    capsys.readouterr()
    assert bench.main(["--input", str(single), "--compare", str(base)]) == 0
    assert "p n/a: fewer than 3 repetitions of the row in a run" in capsys.readouterr().out
