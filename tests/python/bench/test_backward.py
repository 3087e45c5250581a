"""`backplane bench --backward`: the engine times forward+backward of each op with a
`backward:` (bench/backward_workloads.h), checks the gradients against the baseline's
first, counts the least bytes the two passes move, and says its pass in the context, which
tables, compare and merge read. Runs are tiny: these test the command, not the speed."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import backplane
from backplane import bench
from samples import why_cuda_unavailable

ENGINE = backplane.lib_dir().parent / "bin" / "backplane_bench"
CLI = backplane.lib_dir().parent / "bin" / "backplane"
FIXTURES = backplane.lib_dir().parent / "tests" / "fixtures"
QUICK = ["--dtypes=float32", "--min-time=0.01", "--max-time=0.02"]

pytestmark = pytest.mark.skipif(not ENGINE.is_file(), reason="backplane_bench not built (BACKPLANE_BUILD_BENCH=OFF)")


def _engine(tmp_path, *flags, env=None):
    out = tmp_path / "run.json"
    done = subprocess.run([str(ENGINE), "--backward", *QUICK, f"--benchmark_out={out}", "--benchmark_out_format=json",
                           *flags], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads(out.read_text())


def test_a_backward_run_times_each_op_with_a_backward_and_counts_both_passes(tmp_path):
    done, results = _engine(tmp_path, "--backends=cpu", "--ops=add,rms_norm,softmax,scale_",
                            "--shapes=1M_elements,1M_sliced,decode_1x4096,vocab_32x32000")
    assert results["context"]["pass"] == "forward+backward"
    assert results["context"]["bytes_counted"].startswith("minimal forward+backward traffic")
    entries = {e["name"].split("/iterations")[0]: e for e in results["benchmarks"]}
    assert not any(name.startswith("call_overhead") for name in entries)  # a forward call's cost
    assert {(n.split("/")[0], *n.split("/")[2:]) for n in entries} == {
        (op, impl, shape) for op, shapes in [("add", ("1M_elements_float32", "1M_sliced_float32")),
                                             ("rms_norm", ("decode_1x4096_float32",)),
                                             ("softmax", ("vocab_32x32000_float32",))]
        for impl in ("backplane", "reference", "copy_") for shape in shapes}
    assert not [e for e in entries.values() if e.get("error_occurred")]
    # The least forward+backward traffic of the registry's formulas, in bytes.
    N = 1 << 20 << 2  # 1M float32
    X, W = 4096 * 4, 4096 * 4  # rms_norm's x [1, 4096] and weight [4096]
    expected = {
        # add: reads a, b, writes y; backward: a's gradient is grad itself, b's grad * alpha
        ("add", "1M_elements"): 3 * N + 2 * N, ("add", "1M_sliced"): 3 * N + 2 * N,
        # rms_norm: reads x, weight, writes y; backward reads grad, x, weight, writes dx, dweight
        ("rms_norm", "decode_1x4096"): (2 * X + W) + (3 * X + 2 * W),
        # softmax: reads x, writes y; backward reads grad and y (result), writes dx
        ("softmax", "vocab_32x32000"): 2 * 32 * 32000 * 4 + 3 * 32 * 32000 * 4,
    }
    for name, e in entries.items():
        op, _, impl, shape = name.split("/")
        if impl == "copy_":
            continue
        assert "forward+backward" in e["label"], e["label"]
        moved = e["bytes_per_second"] * e["real_time"] * 1e-6
        assert moved == pytest.approx(expected[op, shape.removesuffix("_float32")], rel=1e-9), name
    assert done.stderr.count("scale_ has no backward: in the registry; not benchmarked with --backward") == 1
    assert done.stdout.startswith("forward+backward: each row times one forward and one backward\n")
    # read back, the table says the pass; the rows are the forward run's schema
    assert bench.format_table(results).startswith("forward+backward: each row times")
    assert "### backplane bench: cpu, forward+backward (" in bench.markdown(results)
    assert {t["op"] for t in bench.table(results) if not t["error"] and t["vs_reference"]} == {
        "add", "rms_norm", "softmax"}


def _acme_with_backward(tmp_path, backward: str) -> Path:
    """The acme fixture plugin (a CPU plugin with its own ops) copied, its fused_gelu given
    another `backward:`: a registry formula that is wrong, with a right forward kernel."""
    folder = tmp_path / "acme"
    folder.mkdir(parents=True)
    for f in FIXTURES.glob("libbackplane_acme.*"):
        shutil.copy(f, folder)
    fragment = folder / "libbackplane_acme.ops.yaml"
    right = 'backward: {x: "aten::gelu_backward(grad, x)"}'
    assert right in fragment.read_text(), "the fixture's fragment changed: update this test"
    fragment.write_text(fragment.read_text().replace(right, backward))
    return folder


@pytest.mark.skipif(not (FIXTURES / "libbackplane_acme.so").is_file(), reason="test fixtures not built")
def test_a_wrong_gradient_is_reported_not_timed(tmp_path):
    rows = {}
    for name, backward in [("right", 'backward: {x: "aten::gelu_backward(grad, x)"}'),
                           ("wrong", "backward: {x: grad}")]:
        plugin = _acme_with_backward(tmp_path / name, backward)
        env = {**os.environ, "BACKPLANE_PLUGIN_PATH": str(plugin)}
        _, results = _engine(tmp_path / name, "--backends=acme", "--ops=acme::fused_gelu", env=env)
        (rows[name],) = [r for r in bench.rows(results) if r.impl == "backplane"]
    assert not rows["right"].error and rows["right"].times_us
    assert not rows["wrong"].times_us
    assert rows["wrong"].error.startswith("wrong gradient, not timed: the gradient of x differs from the baseline's "
                                          "(aten::gelu(x)): max |difference| "), rows["wrong"].error
    assert "(tolerance 0.0001 of it)" in rows["wrong"].error


def _why_no_cuda_graphs() -> str:
    if not (backplane.lib_dir() / "backplane_bench_cuda_graph.so").is_file():
        return "this build has no CUDA plugin (nor the --cuda-graph module)"
    return why_cuda_unavailable()


@pytest.mark.skipif(bool(_why_no_cuda_graphs()), reason=_why_no_cuda_graphs() or "runs")
def test_cuda_graphs_capture_the_forward_and_the_backward(tmp_path):
    _, results = _engine(tmp_path, "--backends=cuda", "--cuda-graph", "--ops=add,rms_norm,softmax",
                         "--shapes=1M_elements,decode_32x8192,vocab_32x32000", "--benchmark_repetitions=2")
    rows = bench.rows(results)
    assert {(r.op, r.impl) for r in rows} == {(op, impl) for op in ("add", "rms_norm", "softmax")
                                             for impl in ("backplane", "reference", "copy_")}
    assert all(r.cuda_graph and not r.error and len(r.times_us) == 2 and min(r.times_us) > 0 for r in rows), rows
    assert results["context"]["pass"] == "forward+backward"


def _run(times, passes=None):
    name = "add/cpu/backplane/1M_elements_float32"
    context = {"backend.cpu": "/x/libbackplane_cpu.so (version 0.1.0, key CPU, device cpu)"}
    if passes:
        context["pass"] = passes
    return {"context": context, "benchmarks": [{"name": name, "run_name": name, "run_type": "iteration",
                                                "real_time": t, "time_unit": "us"} for t in times]}


def test_a_forward_run_is_not_compared_or_merged_with_a_forward_backward_run(tmp_path, capsys):
    forward, backward = _run((5.0, 5.0, 5.0)), _run((9.0, 9.0, 9.0), "forward+backward")
    with pytest.raises(ValueError, match=r"the base run times forward, the new one forward\+backward: compare runs "
                                         r"of the same pass \(both with --backward, or neither\)"):
        bench.compare(forward, backward)
    assert len(bench.compare(backward, _run((9.0, 9.0, 9.0), "forward+backward"))) == 1
    assert len(bench.compare(forward, _run((5.0, 5.0, 5.0), "forward"))) == 1  # no key: a forward run
    base, new = tmp_path / "forward.json", tmp_path / "backward.json"
    base.write_text(json.dumps(forward))
    new.write_text(json.dumps(backward))
    assert bench.main(["--input", str(new), "--compare", str(base)]) == 2
    assert "the base run times forward, the new one forward+backward" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"runs of different passes cannot be merged: a times forward, b times "
                                         r"forward\+backward"):
        bench.merge({"a": forward, "b": {**backward, "context": {**backward["context"], "backend.npu": "n"}}})


def test_the_backward_flag_reaches_the_engine_from_python(monkeypatch, capsys):
    seen = []  # the engine's command lines; it is not started (exit 1: run() raises)
    monkeypatch.setattr(bench.subprocess, "run", lambda args, **k: seen.append(args) or
                        subprocess.CompletedProcess(args, 1))
    for backward in (True, False):
        with pytest.raises(RuntimeError, match="exited with 1"):
            bench.run("cpu", ops="add", backward=backward)
    assert "--backward" in seen[0] and "--ops=add" in seen[0] and "--backward" not in seen[1]
    given = {}
    monkeypatch.setattr(bench, "run", lambda *a, **k: given.update(k) or _run((5.0,), "forward+backward"))
    assert bench.main(["--backends", "cpu", "--ops", "add", "--backward"]) == 0
    assert given["backward"] is True
    assert capsys.readouterr().out.startswith("forward+backward: each row times one forward and one backward\n")


def test_the_backplane_command_passes_backward_to_the_engine(tmp_path):
    out = tmp_path / "r.json"
    done = subprocess.run([str(CLI), "bench", "--backends", "cpu", "--ops", "add", "--dtypes", "float32", "--shapes",
                           "1M_elements", "--backward", "--min-time", "0.01", "--max-time", "0.02", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert bench.load(out)["context"]["pass"] == "forward+backward"
    assert done.stdout.startswith("forward+backward: each row times one forward and one backward\n")
