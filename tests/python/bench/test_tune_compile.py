"""`backplane tune --mode compile` (tune_compile.py): which candidates an op has, and, end to
end on CPU (Inductor's C++ backend), cpu against inductor on add at its smallest preset,
producing a file the core reads back. Which candidate wins is the machine's to say; the
test checks what is exact: both timed, the file's entry in compile mode, read back."""
import re

import pytest

import backplane
from backplane.bench import tune, tune_compile

OPS = {op.name: op for op in backplane.ops()}


def test_inductor_is_a_candidate_for_ops_with_a_reference_returning_new_tensors():
    assert tune_compile.can_be_inductor(OPS["add"])
    assert not tune_compile.can_be_inductor(OPS["scale_"]), "writes its argument"
    assert tune_compile.candidates_of(OPS["add"], "CPU", {"cpu": "CPU"}, "float32") == ["cpu", "inductor"]
    assert tune_compile.candidates_of(OPS["add"], "CUDA", {"cpu": "CPU"}, "float32") == []
    assert tune_compile.candidates_of(OPS["scale_"], "CPU", {"cpu": "CPU"}, "float32") == ["cpu"]


def _forcing_is_built() -> bool:
    """Whether this build's core takes an `inductor` bucket (the compile-time selection)."""
    from pathlib import Path

    source = Path(__file__).resolve().parents[3] / "core" / "src" / "plugins" / "selection_file_parse.cpp"
    return source.is_file() and "inductor" in source.read_text()


@pytest.mark.skipif(not _forcing_is_built(), reason="needs the core's `inductor` buckets (issue 47, item 2)")
@pytest.mark.slow
def test_tune_compile_on_cpu_times_cpu_and_inductor_and_the_core_reads_the_file(tmp_path, capsys):
    smallest = min(OPS["add"].bench, key=lambda p: max(__import__("math").prod(v) for k, v in p["args"].items()
                                                        if k in OPS["add"].tensor_args))["name"]
    out = tmp_path / "sel.yaml"
    status = tune.main(["--mode", "compile", "--backends", "cpu", "--ops", "add", "--shapes", smallest,
                        "--min-time", "0.01", "--max-time", "0.05", "--repetitions", "3", "--out", str(out)])
    said = capsys.readouterr()
    assert status == 0, said.err[-3000:]
    text = out.read_text()
    assert '  - op: "add"\n    dispatch_key: "CPU"\n    mode: "compile"\n' in text, (text, said.err)
    m = re.search(r'median_us: \{([^}]*)\}, repetitions: \{cpu: 3, inductor: 3\}', text)
    assert m and [t.split(": ")[0] for t in m.group(1).split(", ")] == ['"cpu"', '"inductor"'], text
    assert re.search(r'plugin: "(cpu|inductor)"', text)
    before = backplane.selection_file()
    try:
        assert backplane.apply_selection(out) == str(out)
    finally:
        backplane.apply_selection(before or None)


def test_presets_of_the_same_sizes_in_other_layouts_are_one_compiled_step(monkeypatch):
    # The producer (x + 0.5) writes a fresh contiguous tensor, so a transposed and a strided
    # preset of one size are the same compiled program: timed once, figures shared.
    calls = []

    def fake_timed(op, key, preset, dtype, candidate, *rest):
        calls.append((preset["name"], candidate))
        return tune_compile.Timing((1.0, 1.0, 1.0), "", "compile")

    monkeypatch.setattr(tune_compile, "_timed", fake_timed)
    cells = tune_compile.measure([OPS["add"]], {"cpu": "CPU"}, ["float32"], "1M_transposed,1M_sliced,1M_elements",
                                 rule=None, repetitions=3)
    timed = sorted(name for name, _ in calls)
    assert timed == ["1M_elements", "1M_elements", "1M_transposed", "1M_transposed"], calls
    by_cell = cells[("add", "CPU")].by_cell
    assert by_cell[("1M_sliced", "float32")] == by_cell[("1M_transposed", "float32")]


def test_progress_piped_is_a_line_a_step_with_the_seconds_so_far(capsys):
    from backplane.bench import tune_compile

    tune_compile.SPENT.update(compile=3.25, timing=1.5, candidates=4)
    for done, name in enumerate(["add 4K float32", "mul 4K float32"]):
        tune_compile.print_progress(done, 2, name)
    tune_compile.print_progress(2, 2, "")
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" at ")[0] for line in lines[:2]] == ["tune --mode compile 1/2", "tune --mode compile 2/2"], lines
    assert lines[1].endswith(" s: mul 4K float32"), lines
    assert lines[2].startswith("tune --mode compile: 2 steps in "), lines
    assert lines[2].endswith(" s; 4 candidates compiled in 3.2 s and timed in 1.5 s"), lines


def test_compile_mode_samples_a_repetition_for_at_most_a_tenth_of_a_second_unless_told():
    from backplane.bench.tune import _compile_stop_rule

    assert _compile_stop_rule(None, None).max_seconds == 0.1
    assert _compile_stop_rule(None, 0.3).max_seconds == 0.3
    assert _compile_stop_rule(0.2, None).max_seconds == 0.2  # never below the minimum asked for
    assert _compile_stop_rule(None, None).min_seconds == _compile_stop_rule(None, 0.5).min_seconds
