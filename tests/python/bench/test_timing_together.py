"""Rows compared with each other are timed side by side (timing.time_steps): one batch size
for all, chosen on the first step, and their repetitions in turn, the order reversed every
other round. `bench --mode compile` times each selected row so with its torch.compile row:
timed minutes apart, 2-4 us CUDA-graph replays of the same generated code differed by 10%
(bench/results/compile-selection). Here on the CPU's wall clock, which follows the same turns."""
import pytest
import torch

import backplane
from backplane import bench
from backplane.bench import compiled, timing

RULE = timing.StopRule(0.0, 0.0, 1.0, 1)  # one sample a repetition


def test_repetitions_are_taken_in_turn_with_one_batch_size():
    calls = []
    steps = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    timed = timing.time_steps(steps, torch.device("cpu"), RULE, repetitions=4)
    assert list(timed) == ["a", "b"] and all(len(t) == 4 for t in timed.values())
    batch = timed["a"][0].calls_per_batch
    assert {s.calls_per_batch for t in timed.values() for s in t} == {batch}
    warm = 2 * timing._WARMUP_CALLS + 1  # each step's warm-up, then one call of the first to size the batch
    sampled = calls[warm:]
    runs = [sampled[i][0] for i in range(0, len(sampled), batch)]  # the step of each sample, in order
    assert runs == ["a", "b", "b", "a", "a", "b", "b", "a"]


def test_one_step_is_timed_as_before():
    (only,) = [timing.time_step(lambda: None, torch.device("cpu"), RULE, repetitions=1)]
    assert len(only) == 1 and only[0].samples == 1


@pytest.mark.skipif(not (backplane.lib_dir().parent / "bin" / "backplane_bench").is_file(),
                    reason="backplane_bench not built (BACKPLANE_BUILD_BENCH=OFF)")
def test_mode_compile_times_each_selected_row_with_its_compiled_row(monkeypatch, tmp_path):
    asked = []

    def time_steps(steps, device, rule, *, repetitions=1, cuda_graph=False, cold_l2=False):
        asked.append((list(steps), repetitions))
        return {name: [timing.Sampled(1e-6, 0.0, 1, 0.01, 1)] * repetitions for name in steps}

    monkeypatch.setattr(compiled, "time_steps", time_steps)
    monkeypatch.setattr(compiled, "compile_reference", lambda fn: fn)  # no Inductor compile: the pairing is tested
    out = tmp_path / "run.json"
    assert bench.main(["--backends", "cpu", "--ops", "mul", "--dtypes", "float32", "--shapes", "1M_elements",
                       "--mode", "compile", "--repetitions", "3", "--json", str(out),
                       "--min-time=0.01", "--max-time=0.02"]) == 0
    assert asked == [(["compiled", "selected"], 3)]
    results = bench.load(out)
    names = {e["name"] for e in results["benchmarks"] if e.get("mode") == "compile"}
    assert names == {"mul/cpu/compiled/1M_elements_float32", "mul/cpu/selected/1M_elements_float32"}
    assert "each in turn with its torch.compile(reference) row" in results["context"]["selected"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (CUDA graphs)")
def test_on_a_gpu_the_graphs_compared_write_the_same_addresses():
    # Recorded into one pool, each capture is given the blocks the one before freed: the same
    # generated code then writes the same memory in both rows.
    written = {"a": set(), "b": set()}

    def step(name):
        def run():
            out = torch.ones(1 << 16, device="cuda")
            if torch.cuda.is_current_stream_capturing():
                written[name].add(out.data_ptr())
        return run

    timed = timing.time_steps({"a": step("a"), "b": step("b")}, torch.device("cuda"), RULE, cuda_graph=True)
    assert all(len(t) == 1 for t in timed.values())
    assert written["a"] and written["a"] == written["b"]


@pytest.mark.skipif(not (backplane.lib_dir().parent / "bin" / "backplane_bench").is_file(),
                    reason="backplane_bench not built (BACKPLANE_BUILD_BENCH=OFF)")
def test_a_row_that_cannot_be_timed_fails_alone(monkeypatch, tmp_path):
    # A selected row that launches no work under --cuda-graph (timing.NoDeviceWork) failed the
    # compiled row timed with it; each is now timed alone after such a failure.
    def fine():
        pass

    def empty():
        pass

    def time_step(step, device, rule, *, repetitions=1, cuda_graph=False, cold_l2=False):
        if step is empty:
            raise timing.NoDeviceWork("the step launches no work on the GPU")
        return [timing.Sampled(1e-6, 0.0, 1, 0.01, 1)] * repetitions

    def time_steps(steps, *args, **kwargs):
        raise timing.NoDeviceWork("the step launches no work on the GPU")

    monkeypatch.setattr(compiled, "time_steps", time_steps)
    monkeypatch.setattr(compiled, "time_step", time_step)
    monkeypatch.setitem(compiled._PREPARE, "compiled", lambda *args: (fine, "compiled label"))
    monkeypatch.setitem(compiled._PREPARE, "selected", lambda *args: (empty, "selected label"))
    out = tmp_path / "run.json"
    assert bench.main(["--backends", "cpu", "--ops", "mul", "--dtypes", "float32", "--shapes", "1M_elements",
                       "--mode", "compile", "--json", str(out), "--min-time=0.01", "--max-time=0.02"]) == 0
    rows = {e["name"]: e for e in bench.load(out)["benchmarks"] if e.get("mode") == "compile"}
    compiled_row = rows["mul/cpu/compiled/1M_elements_float32"]
    assert not compiled_row.get("error_occurred") and compiled_row["real_time"] == pytest.approx(1.0)
    assert compiled_row["timed_alone"] == ("not in turn with the other rows: timing them together failed "
                                           "(NoDeviceWork: the step launches no work on the GPU)")
    selected = rows["mul/cpu/selected/1M_elements_float32"]
    assert selected["error_occurred"] and "NoDeviceWork: the step launches no work" in selected["error_message"]
