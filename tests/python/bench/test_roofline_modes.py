"""Bench rows that match deployment (issue 47, item 4): --cold-l2, the %peak roofline column
from the registry's `flops:` and the engine's measured peak FMA rate, the mode column
(eager, graph, compile) and `--mode compile`'s rows of the selected implementation under
torch.compile. The synthetic runs check the arithmetic exactly; the engine runs are short
(one op, 1M elements, float32, tiny --min-time). The GPU behaviour (L2 flush, CUDA peak
kernel) is checked where CUDA is present, and skipped, saying so, where it is not."""
import json
import subprocess

import pytest
import torch

import backplane
from backplane import bench

from bench_runs import fake_entries, fake_run

ENGINE = backplane.lib_dir().parent / "bin" / "backplane_bench"
pytestmark = pytest.mark.skipif(not ENGINE.is_file(), reason="backplane_bench not built (BACKPLANE_BUILD_BENCH=OFF)")
FAST = ["--min-time=0.01", "--max-time=0.02"]
NO_CUDA = "no CUDA device here: the L2 flush and the CUDA peak kernel run on a GPU only"


def _engine(tmp_path, *flags):
    out = tmp_path / "e.json"
    done = subprocess.run([str(ENGINE), "--dtypes=float32", f"--benchmark_out={out}", "--benchmark_out_format=json",
                           *flags], capture_output=True, text=True, timeout=300)
    return done, (json.loads(out.read_text()) if done.returncode == 0 else None)


def _with_flops(results, flops_per_call, peak="1e+12", backend="cpu"):
    """A made-up run whose backplane and reference rows do `flops_per_call` FLOPs per call,
    on a device whose measured peak is `peak` FLOP/s."""
    results["context"][f"peak_flops.{backend}.float32"] = peak
    for e in results["benchmarks"]:
        if e["name"].split("/")[2] in ("backplane", "reference"):
            e["flops"] = flops_per_call
    return results


# --- flags -------------------------------------------------------------------------------

def test_cold_l2_takes_no_value_and_mode_names_what_it_expects(capsys):
    done = subprocess.run([str(ENGINE), "--cold-l2=yes"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--cold-l2: expected no value (the flag alone), found '--cold-l2=yes'" in done.stderr
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--mode", "graph"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--mode: expected one of eager, compile, found 'graph' (CUDA graph replays: --cuda-graph)" in err
    with pytest.raises(SystemExit):
        bench.main(["--mode", "fast"])
    assert "expected one of eager, compile, found 'fast'" in capsys.readouterr().err


def test_flags_that_time_nothing_with_input_are_refused(tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text(json.dumps(fake_run((5.0,))))
    assert bench.main(["--input", str(run), "--mode", "compile"]) == 2
    assert "--mode compile times torch.compile beside a run of the engine" in capsys.readouterr().err
    assert bench.main(["--input", str(run), "--cold-l2"]) == 2
    assert "--cold-l2 changes how rows are timed; with --input nothing is run" in capsys.readouterr().err


# --- the registry's flops: ---------------------------------------------------------------

def test_ops_expose_the_registry_flops():
    ops = {op.name: op for op in backplane.ops()}
    assert ops["rms_norm"].flops == 4 and ops["add"].flops == 2 and ops["softmax"].flops == 5
    assert ops["identity_conv"].flops is None and ops["crop"].flops is None  # copies: no arithmetic


# --- %peak -------------------------------------------------------------------------------

def test_percent_of_peak_is_flops_over_time_over_the_measured_peak(capsys):
    # backplane: median 6 us, 3e6 FLOPs per call: 5e11 FLOP/s of a 1e12 peak, 50%
    results = _with_flops(fake_run((5.0, 6.0, 7.0)), 3e6)
    (line,) = bench.table(results)
    assert line["pct_peak"] == pytest.approx(0.5, rel=1e-12)
    assert bench.percent_of_peak(3e6, 6.0, 1e12) == pytest.approx(0.5, rel=1e-12)
    assert bench.peak_flops(results) == {("cpu", "float32"): 1e12}
    console = bench.format_table(results)
    head, row = [ln for ln in console.splitlines() if ln.startswith(("op ", "add "))]
    assert head.split()[4:11] == ["mode", "median", "spread", "GB/s", "%copy_", "%peak", "x"]
    assert row.split()[4] == "eager" and row.split()[10] == "50%"  # the median is "6.00 us": two words
    assert "| add | cpu | 1M_elements | float32 | eager | 6.00 | ±16.7% | 2.0 | 50% | 50% | 1.67 |" in \
        bench.markdown(results)
    # small fractions keep two significant digits, in both formatters
    small = _with_flops(fake_run((6.0,)), 2.22e4)  # 3.7e9 FLOP/s: 0.37%
    assert bench.table(small)[0]["pct_peak"] == pytest.approx(0.0037, rel=1e-12)
    assert " 0.37% " in bench.format_table(small) and "| 0.37% |" in bench.markdown(small)


def test_percent_of_peak_is_blank_without_flops_or_peak_and_shared_backends_read_their_devices():
    no_flops = fake_run((6.0,))
    no_flops["context"]["peak_flops.cpu.float32"] = "1e12"
    assert bench.table(no_flops)[0]["pct_peak"] is None
    row = [ln for ln in bench.format_table(no_flops).splitlines() if ln.startswith("add ")][0]
    assert row.split()[10] == "-"
    for peak in ("0", "nan", "fast"):  # not a rate: no peak, not a division by it
        assert bench.table(_with_flops(fake_run((6.0,)), 3e6, peak=peak))[0]["pct_peak"] is None
    shared = _with_flops(fake_run((6.0,)), 3e6)
    shared["context"]["shared_rows.cpu_alt"] = "cpu"
    shared["benchmarks"] += [dict(e, flops=1.5e6) for e in
                             fake_entries("add/cpu_alt/backplane/1M_elements_float32", (3.0,), 2e9)]
    alt = [t for t in bench.table(shared) if t["backend"] == "cpu_alt"][0]
    assert alt["pct_peak"] == pytest.approx(0.5, rel=1e-12)


def test_merged_runs_keep_each_backends_peak(tmp_path):
    cpu = _with_flops(fake_run((6.0,), backend="cpu"), 3e6)
    npu = _with_flops(fake_run((6.0,), backend="npu"), 3e6, peak="2e12", backend="npu")
    merged = bench.merge({"cpu.json": cpu, "npu.json": npu})
    assert bench.peak_flops(merged) == {("cpu", "float32"): 1e12, ("npu", "float32"): 2e12}
    assert "| 50% | 1.67 |" in bench.side_by_side(merged) and "| 25% | 1.67 |" in bench.side_by_side(merged)


# --- the mode column ---------------------------------------------------------------------

def test_each_line_says_its_mode(capsys):
    results = fake_run((6.0,))
    for e in results["benchmarks"]:
        e["cuda_graph"] = 1  # the engine's --cuda-graph rows
    results["benchmarks"] += [dict(e, mode="compile", cuda_graph=1) for e in
                              fake_entries("add/cpu/selected/1M_elements_float32", (3.0,), 4e9)]
    lines = {(t["impl"], t["mode"]) for t in bench.table(results)}
    assert lines == {("backplane", "graph"), ("selected", "compile+graph")}
    console = [ln.split() for ln in bench.format_table(results).splitlines() if ln.startswith("add ")]
    assert [ln[4] for ln in console] == ["graph", "compile+graph"]
    assert "torch.compile(selected)" in bench.format_table(results)
    markdown = bench.markdown(results)
    assert "| op | backend | preset | dtype | mode | µs |" in markdown
    assert "| add | cpu | 1M_elements | float32 | compile+graph (selected) | 3.00 |" in markdown
    assert "| cpu mode |" in bench.side_by_side(results)


def test_the_engines_rows_say_eager_and_its_context_records_the_peak_and_the_cache(tmp_path):
    done, results = _engine(tmp_path, "--backends=cpu", "--ops=mul", *FAST)
    assert done.returncode == 0, done.stderr[-3000:]
    head, row = [ln.split() for ln in done.stdout.splitlines() if ln.startswith(("op ", "mul "))]
    assert head[4] == "mode" and row[4] == "eager"
    ctx = results["context"]
    assert float(ctx["peak_flops.cpu.float32"]) > 0 and "FMA chains on" in ctx["peak_flops"]
    assert ctx["cache"].startswith("warm")
    (mine,) = [e for e in results["benchmarks"] if e["name"].startswith("mul/cpu/backplane/1M_elements_float32")]
    assert mine["flops"] == 1 << 20  # mul: 1 FLOP per element of the largest argument
    assert row[10].endswith("%")  # its %peak (the median is two words)


# --- --cold-l2 ---------------------------------------------------------------------------

def test_cold_l2_is_accepted_on_cpu_rows_and_the_context_says_it_changed_nothing(tmp_path):
    done, results = _engine(tmp_path, "--backends=cpu", "--ops=mul", "--cold-l2", *FAST)
    assert done.returncode == 0, done.stderr[-3000:]
    assert results["context"]["cache"].startswith("cold L2 (--cold-l2): no cuda row in this run")
    assert not any(e.get("cold_l2") for e in results["benchmarks"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_cold_l2_cuda_rows_are_one_call_after_a_flush(tmp_path):
    done, results = _engine(tmp_path, "--backends=cuda", "--ops=add", "--cold-l2", *FAST)
    assert done.returncode == 0, done.stderr[-3000:]
    timed = [e for e in results["benchmarks"] if e["name"].startswith("add/cuda/") and not e.get("error_occurred")]
    assert timed and all(e["cold_l2"] == 1 and e["calls_per_batch"] == 1 for e in timed)
    assert "each sample of a cuda row is one call after an untimed write" in results["context"]["cache"]
    assert float(results["context"]["peak_flops.cuda.float32"]) > 0


# --- --mode compile ----------------------------------------------------------------------

def test_mode_compile_adds_the_selected_op_under_torch_compile_on_cpu(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert bench.main(["--backends", "cpu", "--ops", "mul", "--dtypes", "float32", "--shapes", "1M_elements",
                       "--mode", "compile", "--no-compile", "--json", str(out), *FAST]) == 0
    printed = capsys.readouterr()
    results = bench.load(out)
    (selected,) = [e for e in results["benchmarks"] if e["name"] == "mul/cpu/selected/1M_elements_float32"]
    assert not selected.get("error_occurred"), selected
    assert selected["mode"] == "compile" and selected["flops"] == 1 << 20
    assert selected["label"] == "float32 torch.compile(selected): torch.ops.backplane.mul"
    assert "torch.compile(selected)" in results["context"]["selected"]
    assert not [e for e in results["benchmarks"] if e["name"].split("/")[2] == "compiled"]  # --no-compile
    modes = [ln.split()[4] for ln in printed.out.splitlines() if ln.startswith("mul ")]
    assert modes == ["eager", "compile"]
