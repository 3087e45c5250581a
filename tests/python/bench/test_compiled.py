"""`backplane bench`'s torch.compile rows (backplane/bench/compiled.py): one per reference
row, timed on its device as the engine times rows, checked against the eager formula
first, on by default only where a backend runs on cuda. One Inductor compile on the CPU
(mul, 1M elements, float32), forward and forward+backward; the other tests stand an eager
function in for it."""
import json

import pytest

import backplane
from backplane import bench
from backplane.bench import compiled

pytestmark = pytest.mark.skipif(not (backplane.lib_dir().parent / "bin" / "backplane_bench").is_file(),
                                reason="backplane_bench not built (BACKPLANE_BUILD_BENCH=OFF)")

ROW = ["--backends", "cpu", "--ops", "mul", "--dtypes", "float32", "--shapes", "1M_elements",
       "--min-time", "0.01", "--max-time", "0.05"]
NAME = "mul/cpu/compiled/1M_elements_float32"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One engine run of the row, without compiled rows."""
    return bench.run("cpu", ops="mul", dtypes="float32", shapes="1M_elements", quiet=True,
                     json_path=tmp_path_factory.mktemp("run") / "run.json", extra=["--min-time=0.01",
                                                                                    "--max-time=0.05"])


def _compiled(results):
    return [e for e in results["benchmarks"] if e["name"].split("/")[2] == "compiled"]


def _eager(monkeypatch, wrong=False):
    """compile_reference replaced by the eager function (or one 1.5 times too large)."""
    monkeypatch.setattr(compiled, "compile_reference",
                        (lambda fn: lambda *t: fn(*t) * 1.5) if wrong else (lambda fn: fn))


@pytest.mark.slow
def test_compile_times_each_reference_row_and_the_table_shows_it(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert bench.main([*ROW, "--compile", "--repetitions", "2", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].endswith("x compile")
    (line,) = [line for line in table.splitlines() if line.startswith("mul ")]
    assert float(line.split()[-1]) > 0  # x compile: the compiled row's time over backplane's
    results = bench.load(out)  # the file the engine wrote, with the compiled rows added
    entries = _compiled(results)
    assert [e["repetition_index"] for e in entries] == [0, 1]  # as many repetitions as the reference row
    reference = [e["bytes_per_second"] * e["real_time"] for e in results["benchmarks"]
                 if e["name"].startswith("mul/cpu/reference/")][0]
    for e in entries:
        assert e["name"] == e["run_name"] == NAME and e["time_unit"] == "us" and e["real_time"] > 0
        assert e["bytes_per_second"] * e["real_time"] == pytest.approx(reference)  # the same bytes per call
        assert e["samples"] >= 1 and e["calls_per_batch"] >= 1 and 0 <= e["spread"]
        assert 0.01 <= e["sampled_seconds"] < 1 and "cuda_graph" not in e  # --min-time 0.01
        assert e["label"] == "float32 torch.compile(reference): aten::mul.Tensor(a, b)"
    (row,) = [r for r in bench.rows(results) if r.impl == "compiled"]
    assert (row.op, row.backend, row.shape, row.dtype, len(row.times_us)) == ("mul", "cpu", "1M_elements", "float32", 2)
    assert "torch.compile(reference)" in results["context"]["compiled"]


def test_a_compiled_result_that_differs_is_an_error_not_timed(run, monkeypatch, capsys):
    _eager(monkeypatch, wrong=True)
    (entry,) = bench.compiled_rows(run, min_time=0.01, max_time=0.05)
    assert entry["name"] == NAME and entry["error_occurred"] and "real_time" not in entry
    assert entry["error_message"].startswith("wrong result against the eager formula, not timed: result: ")
    assert "of 1048576 elements differ beyond 0.0001 of (|eager| + max |eager|)" in entry["error_message"]
    # from the command: said on stderr, and no x compile column without a timed row
    assert bench.main([*ROW, "--compile"]) == 0
    captured = capsys.readouterr()
    assert f"backplane bench: {NAME}: wrong result against the eager formula, not timed" in captured.err
    assert "x compile" not in captured.out


def test_no_compile_turns_off_what_the_default_turns_on(run, monkeypatch):
    asked = []
    monkeypatch.setattr(bench, "add_compiled_rows", lambda *a, **k: asked.append(k["device_types"]))
    monkeypatch.setattr(bench, "run", lambda *a, **k: run)
    monkeypatch.setattr(bench, "wanted_by_default", lambda results: True)  # as on a run with a cuda backend
    assert bench.main(ROW) == 0 and asked == [("cuda",)]  # by default, cuda's rows only
    assert bench.main([*ROW, "--no-compile"]) == 0 and asked == [("cuda",)]
    assert bench.main([*ROW, "--compile"]) == 0 and asked == [("cuda",), None]  # every device's
    # the rows of other devices are left out
    _eager(monkeypatch)
    assert bench.compiled_rows(run, min_time=0.01, max_time=0.05, device_types=("cuda",)) == []


def test_off_by_default_without_a_cuda_backend(run, tmp_path):
    out = tmp_path / "r.json"
    assert bench.main([*ROW, "--json", str(out)]) == 0
    assert _compiled(bench.load(out)) == [] and "compiled" not in bench.load(out)["context"]
    assert not compiled.wanted_by_default(run)
    cuda = {"context": {"backend.cuda": "/x/libbackplane_cuda.so (version 0.1.0, key CUDA, device cuda:0)"}}
    assert compiled.wanted_by_default(cuda)


def test_a_forward_backward_run_checks_and_times_the_gradients(run, monkeypatch):
    backward = {**run, "context": {**run["context"], "pass": "forward+backward"}}
    seen = []

    real_compile = compiled.compile_reference

    def recording(fn):  # compiled, noting which arguments require grad when called
        compiled_fn = real_compile(fn)
        return lambda *t: seen.append(tuple(x.requires_grad for x in t)) or compiled_fn(*t)

    monkeypatch.setattr(compiled, "compile_reference", recording)
    (entry,) = bench.compiled_rows(backward, min_time=0.01, max_time=0.05)
    assert entry["name"] == NAME and entry["real_time"] > 0
    assert set(seen) == {(True, True)}  # mul's backward: names both a and b
    # the right product, the wrong gradient for a: caught before timing
    monkeypatch.setattr(compiled, "compile_reference", lambda fn: lambda a, b: fn(a, b) + 0.5 * (a - a.detach()))
    (entry,) = bench.compiled_rows(backward, min_time=0.01, max_time=0.05)
    assert entry["error_message"].startswith("wrong result against the eager formula, not timed: gradient of a: ")
    with pytest.raises(ValueError, match="the run's context \"pass\" is 'sideways'; expected one of forward, "
                                         "forward\\+backward"):
        bench.compiled_rows({**run, "context": {**run["context"], "pass": "sideways"}})


def test_compile_with_input_is_refused(run, tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text(json.dumps(run))
    assert bench.main(["--input", str(out), "--compile"]) == 2
    assert "--compile times torch.compile beside a run of the engine; with --input nothing is run" in \
        capsys.readouterr().err


def test_the_stop_rule_is_the_engines():
    """Python asks bench/adaptive_stop.h (through lib/backplane_bench_c_api.so) rather than
    deciding: the defaults and decisions below are the engine's."""
    from dataclasses import replace

    from backplane.bench.native import StopRule, default_stop_rule, relative_spread, should_stop
    from backplane.bench.timing import stop_rule

    assert relative_spread([5, 1, 4, 2, 3]) == pytest.approx(1 / 3)  # (q75 4 - q25 2) / (2 * median 3)
    rule = default_stop_rule()
    assert rule == StopRule(min_seconds=0.05, max_seconds=0.5, target_spread=0.02, min_samples=5)
    steady = [1.0] * 5
    assert not should_stop(steady, 0.049, rule) and should_stop(steady, 0.05, rule)
    assert not should_stop([1.0, 2.0, 3.0, 4.0, 5.0], 0.2, rule) and should_stop([1.0, 9.0], 0.5, rule)
    assert not should_stop([], 1.0, rule)  # one sample at least, whatever the time
    # an unset maximum is at least the minimum
    assert stop_rule(min_time=2) == replace(rule, min_seconds=2, max_seconds=2)
    with pytest.raises(ValueError, match="--max-time: expected at least --min-time \\(1 s\\), found 0.5"):
        stop_rule(min_time=1, max_time=0.5)


def test_inputs_are_the_presets_views():
    import torch
    from backplane.bench.inputs import preset_for, preset_values

    (mul,) = [op for op in backplane.ops() if op.name == "mul"]
    for label, strides in (("1M_transposed", (1, 1024)), ("1M_sliced", (2048, 2))):
        values = preset_values(mul, preset_for(mul, label), dtype=torch.bfloat16, device="cpu", requires_grad=("a",))
        a, b = values["a"], values["b"]
        assert a.shape == b.shape == (1024, 1024) and a.stride() == b.stride() == strides
        assert a.dtype == torch.bfloat16 and a.requires_grad and not b.requires_grad
    with pytest.raises(ValueError, match="mul has no bench preset named 'huge'; its presets: 1M_elements, "):
        preset_for(mul, "huge")
