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
