"""`backplane tune`'s decision with repetitions (tune_decision.py): the margin and the
one-sided U test together, dtypes decided apart, the modes and their refusals, and the
environment written into the file. Decided on made-up figures: nothing is timed here."""
import pytest

import backplane
from backplane.bench import significance, tune
from backplane.bench.tune_decision import Cells, Timing, decide_cells
from tune_runs import context, figures, row, tune_in_process

OPS = backplane.ops()
# The plugins here are names only, so the core's read-back says they are not loaded.
pytestmark = pytest.mark.filterwarnings("ignore:.*names plugins that are not loaded")


def _rows(backend, shape, times, dtype="float32"):
    return [row("add", backend, shape, t, dtype) for t in times]


def _decide(by_cell, candidates=("a", "b"), margin=0.05, alpha=0.05):
    cells = {("add", "CPU"): Cells(list(candidates), {k: {c: Timing(tuple(t)) for c, t in v.items()}
                                                      for k, v in by_cell.items()})}
    return decide_cells(cells, OPS, margin, alpha)


def test_the_one_sided_u_test_leans_the_right_way():
    fast, slow = [1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.1, 2.2, 2.3, 2.4]
    assert significance.faster_p(fast, slow) < 0.01
    assert significance.faster_p(slow, fast) > 0.99
    assert significance.faster_p(fast[:2], slow) is None  # below 3 samples: no test


def test_a_3_percent_lead_within_the_noise_keeps_the_incumbent():
    # The margin (1%) is passed, the U test is not: a near-tie.
    incumbent, noisy = [100, 90, 110, 95, 105], [97, 80, 115, 92, 102]
    decision = _decide({("4K_elements", "float32"): {"a": incumbent, "b": noisy}}, margin=0.01)
    (entry,) = decision.entries
    assert [b["plugin"] for b in entry["buckets"]] == ["a"]
    (figure,) = entry["buckets"][0]["measured"]
    assert figure["p_faster"]["b"] > 0.05 and figure["repetitions"] == {"a": 5, "b": 5}
    assert decision.notes == ()


def test_a_20_percent_lead_that_holds_every_repetition_wins():
    decision = _decide({("4K_elements", "float32"): {"a": [100, 101, 99, 100, 102], "b": [80, 81, 79, 80, 82]}})
    (entry,) = decision.entries
    assert [b["plugin"] for b in entry["buckets"]] == ["b"]
    assert entry["buckets"][0]["measured"][0]["p_faster"]["b"] < 0.05


def test_a_lead_below_the_margin_keeps_the_incumbent_however_consistent():
    decision = _decide({("4K_elements", "float32"): {"a": [100, 100, 100], "b": [97, 97, 97]}})
    assert [b["plugin"] for b in decision.entries[0]["buckets"]] == ["a"]


def test_a_stricter_alpha_keeps_the_incumbent():
    # 3 repetitions each, entirely apart: one-sided p is about 0.04, which 0.01 does not accept.
    by_cell = {("4K_elements", "float32"): {"a": [100, 101, 102], "b": [50, 51, 52]}}
    assert [b["plugin"] for b in _decide(by_cell).entries[0]["buckets"]] == ["b"]
    assert [b["plugin"] for b in _decide(by_cell, alpha=0.01).entries[0]["buckets"]] == ["a"]


def test_one_repetition_is_decided_by_the_margin_alone_and_said():
    decision = _decide({("4K_elements", "float32"): {"a": [100], "b": [50]}})
    assert [b["plugin"] for b in decision.entries[0]["buckets"]] == ["b"]
    assert decision.notes == ("add on CPU (float32): 4096 elements: fewer than 3 repetitions of a candidate at a "
                              "preset, so no significance test could be made; decided by the margin alone",)
    text = tune.selection_yaml(decision.entries, {"command": "x"}, [], decision.notes)
    assert "# Note: add on CPU (float32): 4096 elements: fewer than 3 repetitions" in text


def test_dtypes_with_different_winners_get_an_entry_each():
    fast, slow = [50, 51, 52], [100, 101, 102]
    decision = _decide({("4K_elements", "float32"): {"a": slow, "b": fast},
                        ("4K_elements", "bfloat16"): {"a": fast, "b": slow}})
    assert [(e.get("dtype"), [b["plugin"] for b in e["buckets"]]) for e in decision.entries] == \
        [("bfloat16", ["a"]), ("float32", ["b"])]
    text = tune.selection_yaml(decision.entries, {"command": "x"})
    assert '    dtype: "bfloat16"\n    mode: "eager"\n    buckets:' in text


def test_dtypes_with_the_same_winners_share_one_entry():
    fast, slow = [50, 51, 52], [100, 101, 102]
    decision = _decide({("4K_elements", "float32"): {"a": slow, "b": fast},
                        ("4K_elements", "bfloat16"): {"a": slow, "b": fast},
                        ("1M_elements", "float32"): {"a": fast, "b": slow},
                        ("1M_elements", "bfloat16"): {"a": fast, "b": slow}})
    (entry,) = decision.entries
    assert "dtype" not in entry and entry["mode"] == "eager"
    assert [(b.get("up_to"), b["plugin"]) for b in entry["buckets"]] == [(4096, "b"), (None, "a")]
    assert sorted(m["dtype"] for m in entry["buckets"][0]["measured"]) == ["bfloat16", "float32"]


def test_the_engines_repetitions_reach_the_test(monkeypatch, tmp_path):
    """--from-json of a 3-repetition run: every repetition counted, the p-value in the file."""
    rows = [*_rows("a", "4K_elements", [10, 10.1, 10.2]), *_rows("b", "4K_elements", [5, 5.1, 5.2])]
    out = tmp_path / "sel.yaml"
    assert tune_in_process(monkeypatch, "--from-json", figures(tmp_path / "run.json", rows), "--out", out) == 0
    text = out.read_text()
    assert 'mode: "eager"' in text and 'repetitions: {a: 3, b: 3}, p_faster: {b: 0.0' in text, text
    assert "no significance test" not in text


def _args(*argv):
    return tune.parser().parse_args(list(argv))


@pytest.mark.parametrize("argv, mode, graphed", [
    ((), "eager", False),
    (("--cuda-graph",), "graph", True),
    (("--mode", "graph"), "graph", True),
    (("--mode", "compile"), "compile", False),
    (("--mode", "compile", "--cuda-graph"), "compile", True),
])
def test_modes(argv, mode, graphed):
    assert tune.resolve_mode(_args(*argv)) == (mode, graphed)


@pytest.mark.parametrize("argv, found", [
    (("--mode", "eager", "--cuda-graph"), "--cuda-graph: times CUDA graph replays, which is --mode graph"),
    (("--mode", "compile", "--from-json", "x.json"), "--from-json: expected the engine's rows"),
    (("--mode", "compile", "--json", "x.json"), "--json: expected the engine's rows"),
])
def test_contradicting_mode_flags_are_refused(argv, found):
    with pytest.raises(tune.UsageError, match=found.replace("(", r"\(")):
        tune.resolve_mode(_args(*argv))


def test_compile_mode_takes_one_plugin_and_eager_two(capsys):
    assert tune._checked(_args("--backends", "cpu", "--mode", "compile"), "compile") == ["cpu"]
    assert tune.main(["--backends", "cpu"]) == 2
    assert "--backends: expected two or more plugins to choose among, found 'cpu'" in capsys.readouterr().err
    assert tune.main(["--backends", "cpu", "--mode", "graph"]) == 2


@pytest.mark.parametrize("flag, value, found", [
    ("--alpha", "0", "--alpha: expected a significance level above 0 and at most 1, found 0.0"),
    ("--repetitions", "0", "--repetitions: expected 1 or more, found 0"),
])
def test_bad_alpha_and_repetitions_are_refused(flag, value, found, capsys):
    assert tune.main(["--backends", "a,b", flag, value]) == 2
    assert found in capsys.readouterr().err


ENVIRONMENT = {"torch": "2.0.0", "devices": [{"type": "cuda", "name": "GPU", "capability": "9.0", "driver": "1"}],
               "plugins": [{"name": "a", "version": "0.1.0", "sha256": "ab" * 32},
                           {"name": "b", "version": "0.2.0", "sha256": "cd" * 32},
                           {"name": "unrelated", "version": "1", "sha256": "ef" * 32}]}


@pytest.mark.filterwarnings("ignore:.*was measured elsewhere")  # the given torch is not this one
def test_the_environment_is_written_and_read_back(monkeypatch, tmp_path):
    from backplane import selection_environment

    # The figures' plugins are names only: what current() would record for them, given.
    monkeypatch.setattr(selection_environment, "current", lambda plugins=None: ENVIRONMENT)
    rows = [*_rows("a", "4K_elements", [10, 10.1, 10.2]), *_rows("b", "4K_elements", [5, 5.1, 5.2]),
            *_rows("a", "1M_elements", [5, 5.1, 5.2]), *_rows("b", "1M_elements", [10, 10.1, 10.2])]
    out = tmp_path / "sel.yaml"
    assert tune_in_process(monkeypatch, "--from-json", figures(tmp_path / "run.json", rows), "--out", out) == 0
    text = out.read_text()
    # The plugins the buckets name, the devices of the entries' types (CPU here: none).
    assert ('environment:\n  torch: "2.0.0"\n  devices: []\n  plugins:\n'
            f'    - {{name: "a", version: "0.1.0", sha256: "{"ab" * 32}"}}\n'
            f'    - {{name: "b", version: "0.2.0", sha256: "{"cd" * 32}"}}\nops:') in text, text


def test_graph_mode_says_which_entries_were_timed_eagerly(monkeypatch, tmp_path, capsys):
    rows = [*_rows("a", "4K_elements", [10, 10.1, 10.2]), *_rows("b", "4K_elements", [5, 5.1, 5.2])]
    run = figures(tmp_path / "run.json", rows, ctx=context("a", "b"))
    out = tmp_path / "sel.yaml"
    assert tune_in_process(monkeypatch, "--from-json", run, "--cuda-graph", "--out", out) == 0
    assert "add on CPU: --mode graph times cuda rows only; timed as eager calls (mode: eager)" in \
        capsys.readouterr().err
    assert 'mode: "eager"' in out.read_text()


class _FakeJob:
    """torch.distributed as a job of two ranks would answer this rank (0): rank 1's own
    answer to the gather is `theirs`."""

    def __init__(self, theirs):
        self.theirs, self.broadcast = theirs, []

    def get_world_size(self):
        return 2

    def all_gather_object(self, out, mine):
        out[:] = [mine, self.theirs]

    def broadcast_object_list(self, box, src):
        self.broadcast.append((list(box), src))


def test_rank_0s_text_goes_to_every_rank_and_a_failed_rank_fails_them_all(monkeypatch):
    from backplane.bench import tune_ranks

    job = _FakeJob(None)
    monkeypatch.setattr(tune_ranks, "job", lambda: job)
    assert tune_ranks.rank0_text("text", None) == "text" and job.broadcast == [(["text"], 0)]
    monkeypatch.setattr(tune_ranks, "job", lambda: _FakeJob("the engine exited with 1"))
    with pytest.raises(tune_ranks.RankFailed, match=r"^rank 1: the engine exited with 1$"):
        tune_ranks.rank0_text("text", None)
    monkeypatch.setattr(tune_ranks, "job", lambda: None)  # alone: the text, or its own failure
    assert tune_ranks.rank0_text("text", None) == "text"
    with pytest.raises(tune_ranks.RankFailed, match="^no space$"):
        tune_ranks.rank0_text(None, "no space")


def test_two_ranks_write_and_apply_rank_0s_file(tmp_path):
    """A real gloo job of two ranks on this machine, one --out for both (a shared file
    system): both exit 0 with rank 0's file in force, which apply_selection compared."""
    import socket
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from conftest import run_python

    rows = [*_rows("a", "4K_elements", [10, 10.1, 10.2]), *_rows("b", "4K_elements", [5, 5.1, 5.2])]
    run = figures(tmp_path / "run.json", rows)
    out = tmp_path / "sel.yaml"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    program = Path(__file__).parent / "programs" / "tune_on_ranks.py"
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda r: run_python(program, r, port, run, out, timeout=120), (0, 1)))
    for rank, d in enumerate(done):
        assert d.returncode == 0 and f"status 0 selection {out}" in d.stdout, (rank, d.stdout, d.stderr[-2000:])
    assert "add              CPU          every size: b" in done[0].stdout
    assert "wrote" not in done[1].stdout, "rank 0 reports; the others are quiet"
    assert '- {plugin: "b", measured: [' in out.read_text()
