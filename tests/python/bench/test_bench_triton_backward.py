"""`backplane bench --backward` with a plugin of kind triton (triton_rows.py, with
backward_workload.py mirroring bench/backward_workloads.cpp): the triton rows are the
engine's forward+backward rows, read beside them. The in-tree plugin runs under Triton's
CPU interpreter in child processes only (as test_bench_triton_rows.py); one run serves
most tests. Smallest presets, shortest times: a forward+backward of rms_norm takes about
0.3 s under the interpreter."""
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import backplane
import backplane.bench as bench
from backplane.bench import backward_workload, triton_rows
from backplane.bench.inputs import preset_for, preset_values
from test_bench_triton_rows import _bench, _env  # its module-level skips (no triton, no plugin) apply here too
from triton_interpreter import fault as interpreter_fault

ROWS = ["add/{}/backplane/4K_elements_float32", "rms_norm/{}/backplane/decode_1x4096_float32"]
QUICK = ["--backward", "--dtypes", "float32", "--min-time", "0.01", "--max-time", "0.02", "--no-compile"]
PROGRAMS = Path(__file__).parent / "programs"


@pytest.fixture(scope="module")
def backward_run(tmp_path_factory):
    _needs_an_interpreter_that_loops()
    out = tmp_path_factory.mktemp("backward") / "run.json"
    done = _bench("--backends", "cpu,triton", *QUICK, "--ops", "add,rms_norm,rms_norm_backward", "--shapes",
                  "4K_elements,decode_1x4096", "--json", str(out))
    assert done.returncode == 0, done.stderr
    return done, bench.load(out)


def _needs_an_interpreter_that_loops():
    """rms_norm_backward's kernels loop over a bound passed as an argument."""
    if interpreter_fault():
        pytest.skip(interpreter_fault())


def _entries(results) -> dict:
    return {e["name"].split("/iterations")[0]: e for e in results["benchmarks"]}


def _per_call(entry, rate) -> float:
    return entry[rate] * entry["real_time"] * 1e-6  # real_time in us


def test_triton_rows_are_timed_as_the_engines_forward_backward_rows(backward_run):
    done, results = backward_run
    assert results["context"]["pass"] == "forward+backward"
    assert "forward run only" not in done.stderr
    entries = _entries(results)
    assert {n for n in entries if n.split("/")[1] == "triton"} == {r.format("triton") for r in ROWS}
    assert {n for n in entries if n.split("/")[1:3] == ["cpu", "backplane"]} == {r.format("cpu") for r in ROWS}
    for row in ROWS:
        ours, engines = entries[row.format("triton")], entries[row.format("cpu")]
        assert ours["label"] == engines["label"] and " forward+backward backplane::" in ours["label"]
        assert "mode" not in ours and ours["samples"] >= 1 and not ours.get("error_occurred")
        # The least both passes move: the engine's count, read from the row's reference row.
        reference = entries[row.format("cpu").replace("/backplane/", "/reference/")]
        for rate in ("bytes_per_second", "items_per_second"):
            assert _per_call(ours, rate) == pytest.approx(_per_call(reference, rate), rel=1e-9), (row, rate)
    assert not any("flops" in entries[r.format("triton")] for r in ROWS)  # %peak: blank with --backward
    # One table, the engine's title and columns; x base filled for the triton lines too.
    assert done.stdout.startswith("forward+backward: each row times one forward and one backward\n")
    lines = [line.split() for line in done.stdout.splitlines() if line.split()[3:4] == ["triton"]]
    assert [line[:5] for line in lines] == [["add", "4K_elements", "float32", "triton", "eager"],
                                            ["rms_norm", "decode_1x4096", "float32", "triton", "eager"]]
    assert all(line[-1] != "-" for line in lines), done.stdout
    assert {t["op"] for t in bench.table(results) if t["backend"] == "triton" and t["vs_reference"]} == {
        "add", "rms_norm"}


def test_an_op_without_a_backward_is_reported_once_as_the_engine_reports_it(backward_run):
    done, results = backward_run
    assert done.stderr.count("rms_norm_backward has no backward: in the registry; not benchmarked with "
                             "--backward") == 1
    assert not [n for n in _entries(results) if n.startswith("rms_norm_backward/")]
    assert "not implemented on triton" not in done.stderr


def test_the_python_sample_is_the_engines(backward_run):
    # backward_workload.py mirrors backward_workloads.cpp: the engine's counts of the same
    # row (its reference row's bytes and elements) must follow from the Python sample's
    # inputs requiring grad and output gradients.
    _, results = backward_run
    backplane.load("cpu")
    (op,) = [o for o in backplane.ops() if o.name == "rms_norm"]
    values = preset_values(op, preset_for(op, "decode_1x4096"), dtype=torch.float32, device="cpu")
    workload = backward_workload.ForwardBackward(op, lambda: [backplane.torch_op("rms_norm")(**values)], values)
    assert list(workload.inputs) == ["x", "weight"] and all(t.is_leaf for t in workload.inputs.values())
    assert [tuple(g.shape) for g in workload.output_grads] == [(1, 4096)]
    engines = _entries(results)["rms_norm/cpu/reference/decode_1x4096_float32"]
    assert _per_call(engines, "items_per_second") == pytest.approx(sum(g.numel() for g in workload.output_grads))
    forward = sum(values[n].nbytes for n in op.tensor_args) + sum(o.nbytes for o in workload.first_outputs)
    reads = sum(g.nbytes for g in workload.output_grads) + values["x"].nbytes + values["weight"].nbytes  # its formula
    written = sum(t.nbytes for t in workload.inputs.values())  # one gradient per input requiring grad
    assert _per_call(engines, "bytes_per_second") == pytest.approx(forward + reads + written, rel=1e-9)
    assert workload.disagreement() is None


def test_a_wrong_triton_gradient_is_reported_not_timed(tmp_path):
    _needs_an_interpreter_that_loops()
    out = tmp_path / "run.json"
    done = subprocess.run([sys.executable, str(PROGRAMS / "triton_wrong_backward.py"), "--backends", "cpu,triton",
                           *QUICK, "--ops", "rms_norm", "--shapes", "decode_1x4096", "--json", str(out)],
                          env=_env(True), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    row = next(r for r in bench.rows(bench.load(out)) if r.backend == "triton")
    expected = ("wrong gradient, not timed: the gradient of x differs from the baseline's (aten::rms_norm(x, "
                "[aten::size.int(x, -1)], weight, eps)): max |difference| ")
    assert row.error.startswith(expected) and "(tolerance 0.0001 of it)" in row.error, row.error
    assert not row.times_us
    assert f"rms_norm/triton/backplane/decode_1x4096_float32: {expected}" in done.stderr


def _why_no_cuda_graphs() -> str:
    if not (backplane.lib_dir() / "backplane_bench_cuda_graph.so").is_file():
        return "this build has no CUDA plugin (nor the --cuda-graph module)"
    return "" if torch.cuda.is_available() else "no CUDA device in this process"


@pytest.mark.skipif(bool(_why_no_cuda_graphs()), reason=_why_no_cuda_graphs() or "runs")
def test_on_a_gpu_the_triton_forward_backward_is_replayed_from_a_cuda_graph(tmp_path):
    out = tmp_path / "run.json"
    done = _bench("--backends", "cuda,triton", "--cuda-graph", *QUICK, "--ops", "rms_norm", "--shapes",
                  "decode_32x8192", "--json", str(out), interpret=False)
    assert done.returncode == 0, done.stderr
    rows = {r.backend: r for r in bench.rows(bench.load(out)) if r.impl == "backplane"}
    assert set(rows) == {"cuda", "triton"}, done.stderr
    bad = {b: r.error or f"cuda_graph={r.cuda_graph} times={r.times_us}" for b, r in rows.items()
           if not (r.cuda_graph and not r.error and r.times_us and min(r.times_us) > 0)}
    assert not bad, f"{bad}\n{done.stderr[-3000:]}"


def test_where_a_backward_formulas_ops_run():
    ops = {o.name: o for o in backplane.ops()}
    assert triton_rows._backward_kernels(ops, ops["rms_norm"], "triton", "cpu", "float32") == [
        ("rms_norm_backward", "triton")]
    assert triton_rows._backward_kernels(ops, ops["mul"], "triton", "cpu", "float32") == [("mul_backward", "cpu")]
    assert triton_rows._backward_kernels(ops, ops["rotary"], "triton", "cpu", "float32") == []  # itself, held


def test_a_backward_op_the_plugin_does_not_serve_is_named(capsys):
    ops = {o.name: o for o in backplane.ops()}
    triton_rows._say_where_the_backward_runs(ops, ops["rms_norm"], "triton", "cpu", "float32")
    assert capsys.readouterr().err == ""
    triton_rows._say_where_the_backward_runs(ops, ops["mul"], "triton", "cpu", "float32")
    assert capsys.readouterr().err == ("backplane bench: mul in float32: its backward calls mul_backward, which "
                                       "triton does not serve; the triton row's backward runs cpu's kernel\n")
    served_by_neither = {**ops, "mul_backward": SimpleNamespace(**{**vars(ops["mul_backward"]), "backends": {}})}
    triton_rows._say_where_the_backward_runs(served_by_neither, ops["mul"], "triton", "cpu", "float32")
    assert capsys.readouterr().err.endswith("the triton row's backward runs its reference: through ATen (neither "
                                            "triton nor cpu serves it)\n")


def _run(passes):
    return {"context": {"pass": passes, "backend.cpu": "/x/libbackplane_cpu.so (version 0.1.0, key CPU, device cpu)"},
            "benchmarks": []}


def test_an_unknown_pass_is_refused():
    with pytest.raises(ValueError, match=r"""the run's context "pass" is 'sideways'; expected one of forward, """
                                         r"forward\+backward"):
        triton_rows.triton_rows(_run("sideways"), ["triton"])


def test_a_library_backend_that_cannot_load_beside_the_plugin_skips_it(monkeypatch, capsys):
    plugin = SimpleNamespace(name="triton", dispatch_key="CPU", path="/x/triton.manifest.yaml", version="0.1")

    def load(name):
        if name == "triton":
            return [plugin]
        raise backplane.BackendError(f"backend '{name}': gone")

    monkeypatch.setattr(backplane, "load", load)
    assert triton_rows.triton_rows(_run("forward+backward"), ["triton"]) == []
    assert ("backplane bench: skipping backend 'triton': its backward rows need cpu loaded beside it: backend "
            "'cpu': gone\n") in capsys.readouterr().err


def test_gradients_that_differ_are_named():
    ours = torch.tensor([1.0, 2.0])
    assert backward_workload.normwise_disagreement(ours, ours + 1e-5) is None  # within 1e-4 of max(2, 1)
    assert backward_workload.normwise_disagreement(ours, ours + 1e-3) == (
        "max |difference| 0.001 against max |backplane's| 2 (tolerance 0.0001 of it)")
    assert backward_workload.normwise_disagreement(ours.bfloat16(), ours.bfloat16() + 0.0625) == (
        "max |difference| 0.0625 against max |backplane's| 2 (tolerance 0.01 of it)")
    assert backward_workload.normwise_disagreement(ours, torch.tensor([1.0, float("nan")])) == (
        "max |difference| nan against max |backplane's| 2 (tolerance 0.0001 of it)")
    assert backward_workload.normwise_disagreement(ours, torch.zeros(3)) == "sizes [3] where backplane's are [2]"


def test_a_sample_without_a_graph_or_with_too_few_baseline_values_is_refused():
    (op,) = [o for o in backplane.ops() if o.name == "rms_norm"]
    with pytest.raises(ValueError, match="no output of backplane::rms_norm requires grad; expected a graph to the "
                                         "arguments its backward: names"):
        backward_workload.gradients(op, [torch.zeros(2)], [torch.ones(2)], {"x": torch.zeros(2, requires_grad=True)})
    two = SimpleNamespace(baseline="", reference="aten::neg(x)")
    with pytest.raises(ValueError, match=r"the baseline gives 1 value\(s\) for 2 output\(s\)"):
        backward_workload.baseline_outputs(two, {"x": torch.zeros(2)}, 2)


@pytest.mark.parametrize("first_use", ["disagreement", "step"])
def test_the_first_forwards_graph_is_let_go_before_timing(first_use):
    # Kept alive, its AccumulateGrad nodes keep the first forward's stream, and a capture of
    # forward+backward on another stream is invalidated (the H200, 2026-12-03).
    import gc
    import weakref

    backplane.load("cpu")
    (op,) = [o for o in backplane.ops() if o.name == "rms_norm"]
    values = preset_values(op, preset_for(op, "decode_1x4096"), dtype=torch.float32, device="cpu")
    workload = backward_workload.ForwardBackward(op, lambda: [backplane.torch_op("rms_norm")(**values)], values)
    first = weakref.ref(workload.first_outputs[0])
    assert first() is not None and first().grad_fn is not None
    if first_use == "disagreement":
        assert workload.disagreement() is None
    else:
        workload.step()
    gc.collect()
    assert first() is None and workload.first_outputs is None
    workload.step()  # still times: the output gradients and inputs are kept
