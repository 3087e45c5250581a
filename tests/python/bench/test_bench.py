"""`backplane bench`: the engine's selection flags, the correctness check before timing,
the table, the JSON and the command's errors (comparisons and result files:
test_bench_compare.py). Runs are tiny (one op, one preset, a few repetitions at a short minimum time): these test
the command, not the speed."""
import json
import os
import subprocess
from pathlib import Path

import pytest

import backplane
from backplane import bench
from bench_runs import fake_entries, fake_run, no_run

ROOT = Path(__file__).resolve().parents[2]
CLI = backplane.lib_dir().parent / "bin" / "backplane"
FIXTURES = backplane.lib_dir().parent / "tests" / "fixtures"
QUICK = ["--min-time=0.01"]

pytestmark = pytest.mark.skipif(not (backplane.lib_dir().parent / "bin" / "backplane_bench").is_file(),
                                reason="backplane_bench not built (BACKPLANE_BUILD_BENCH=OFF)")


def test_table_ratios_and_copy_fraction():
    (row,) = bench.table(fake_run((5.0, 6.0, 7.0)))
    assert row["median_us"] == 6.0
    assert row["spread"] == pytest.approx(1 / 6)
    assert row["vs_reference"] == pytest.approx(10 / 6)
    assert row["pct_copy"] == pytest.approx(0.5)
    assert row["plugin"] == "/x/libbackplane_cpu.so"


def test_a_failed_row_is_reported_not_timed():
    (row,) = bench.table(fake_run((), error="wrong result against the reference, not timed: 3 of 4 differ"))
    assert row["error"].startswith("wrong result")
    assert "FAILED: wrong result" in bench.format_table(fake_run((), error="wrong result against the reference"))


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


@pytest.mark.parametrize("flags, env, message", [
    (["--backends=cpu,,cuda"], None, "--backends 'cpu,,cuda' has an empty entry: expected backend names separated "
                                     "by ',' ('none' loads none)"),
    (["--backends", "none,cpu"], None, "--backends 'none,cpu': 'none' loads no backend, so it stands alone"),
    (["--backends=none"], None, "--backends 'none': 'none' loads no backend, which leaves nothing to benchmark"),
    ([], "cpu,,cuda", "BACKPLANE_BACKENDS='cpu,,cuda' has an empty entry: expected backend names separated by ',' "
                      "('none' loads none; unset it to benchmark cpu)"),
    ([], "none", "BACKPLANE_BACKENDS='none': 'none' loads no backend, which leaves nothing to benchmark"),
])
def test_engine_reads_backend_lists_by_the_cli_rule(flags, env, message):
    # The core's backend_names (loader.h) reads the list, as for `backplane --backends`:
    # an empty entry and "none" are refused before anything loads, not taken as names.
    engine = str(backplane.lib_dir().parent / "bin" / "backplane_bench")
    environ = {k: v for k, v in os.environ.items() if k != "BACKPLANE_BACKENDS"}
    if env is not None:
        environ["BACKPLANE_BACKENDS"] = env
    done = subprocess.run([engine, *flags, "--ops=add"], capture_output=True, text=True, timeout=60, env=environ)
    assert done.returncode == 2 and f"backplane_bench: {message}\n" in done.stderr, done.stderr[-2000:]


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
    results = fake_run((5.0, 6.0, 7.0))
    results["context"].update(host_name="box", num_cpus=2, torch_version="2.14.1", date="2026-11-23T10:00:00")
    text = bench.markdown(results, "backplane bench --ops add")
    assert "Machine `box`, 2 CPUs; torch 2.14.1" in text and "(2026-11-23)" in text
    results["context"]["cpu_model"] = "Example CPU @ 2.10GHz"
    assert "Machine `box` (Example CPU @ 2.10GHz), 2 CPUs;" in bench.markdown(results)
    assert "Command: `backplane bench --ops add`" in text
    assert "| add | cpu | 1M_elements | float32 | eager | 6.00 | ±16.7% | 2.0 | 50% | - | 1.67 |" in text


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    bench.plot(fake_run((5.0, 6.0, 7.0)), tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


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
    out.write_text(json.dumps(fake_run((5.0, 5.0, 5.0))))
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


def test_cli_python_side_runs_the_builds_python_without_backplane_python(tmp_path):
    # PATH without python3: only the interpreter the build recorded can reach the Python side
    # (the tests run under it), which refuses the --json that would overwrite the baseline.
    base = tmp_path / "base.json"
    base.write_text(json.dumps(fake_run((5.0, 5.1, 5.2))))
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
    monkeypatch.setattr(bench, "run", no_run)
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


def test_outputs_that_cannot_be_written_are_errors(tmp_path, capsys):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    pytest.importorskip("matplotlib")
    run = tmp_path / "run.json"
    run.write_text(json.dumps(fake_run((5.0, 6.0, 7.0))))
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
    results = fake_run((5.0, 6.0, 7.0))
    for impl, times in (("backplane", (700.0, 710.0, 720.0)), ("torch", (600.0, 590.0, 800.0))):
        results["benchmarks"] += [{"name": f"call_overhead_add/cpu/{impl}/1/real_time", "run_type": "iteration",
                                   "run_name": f"call_overhead_add/cpu/{impl}/1/real_time", "real_time": t,
                                   "time_unit": "ns"} for t in times]
    assert [(c.impl, c.median_ns) for c in bench.call_costs(results)] == [("backplane", 710.0), ("torch", 600.0)]
    assert {r.op for r in bench.rows(results)} == {"add"} and len(bench.table(results)) == 1
    text = bench.markdown(results)
    assert "| add | cpu | 710 | 600 | +110 |" in text
    assert bench.call_cost_table(fake_run((5.0, 6.0, 7.0))) == ""  # a run with --ops has none


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
        return {"context": {}, "benchmarks": fake_entries("add/cpu/backplane/1M_elements_float32", (5.0,))
                + [_copy_entry("add", add_copy_us), _copy_entry("mul", mul_copy_us)]}

    assert "WARNING" not in bench.format_table(run(4.0, 4.4))
    (warning,) = [line for line in bench.format_table(run(4.0, 12.0)).splitlines() if line.startswith("WARNING")]
    assert warning == ("WARNING: noisy run, figures unreliable (a busy machine?): cpu float32 copy_ of 8388608 bytes: "
                       "2 timings from 4.00 to 12.00 us (200% apart, threshold 30%)")


def test_a_backend_reads_its_devices_shared_reference_and_copy_rows():
    results = fake_run((5.0, 6.0, 7.0))
    results["context"]["shared_rows.cpu_alt"] = "cpu"
    results["benchmarks"] += fake_entries("add/cpu_alt/backplane/1M_elements_float32", (3.0, 3.0, 3.0), 2e9)
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
        ["op", "preset", "dtype", "backend", "mode", "median", "spread", "GB/s", "%copy_", "%peak", "x", "base"]]
    assert [line.split()[:5] for line in lines if line.startswith(("add ", "mul "))] == [
        ["add", "1M_elements", "float32", "cpu", "eager"], ["mul", "1M_elements", "float32", "cpu", "eager"]]
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


