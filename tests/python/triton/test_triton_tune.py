"""`backplane tune` with the in-tree Triton plugin (tune_triton.py), under Triton's interpreter
(conftest.py sets TRITON_INTERPRET=1), where it serves the CPU key beside the cpu plugin:
the engine times cpu, bench's triton step the triton rows after it in this process, and the
decision reads both. One real run serves most tests; the forced winners replace both
sides' times (the engine's rows and the Python timer) with chosen ones, so the rule, not
the machine, decides. Smallest preset, 3 repetitions, the shortest times: the interpreter
takes milliseconds per call."""
import copy
import dataclasses
import hashlib
import json
import re
import warnings
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="the Triton plugin needs the triton package (CUDA builds of torch ship it)")

import backplane  # noqa: E402
import backplane.bench as bench  # noqa: E402
from backplane.bench import compiled, tune, tune_triton  # noqa: E402
from backplane.bench.timing import Sampled  # noqa: E402

FAST = ["--ops", "add", "--shapes", "4K_elements", "--repetitions", "3", "--min-time", "0.01", "--max-time", "0.02"]
ROW = "add/triton/backplane/4K_elements_float32"


@pytest.fixture(autouse=True)
def no_selection_left_behind():
    before = backplane.selection_file() or None
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backplane.apply_selection(before)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """tune of cpu against triton, timed for real; (status, stderr, file text, the kept JSON)."""
    folder = tmp_path_factory.mktemp("tune")
    out, kept = folder / "sel.yaml", folder / "run.json"
    status = tune.main(["--backends", "cpu,triton", *FAST, "--json", str(kept), "--out", str(out)])
    return status, out.read_text() if out.exists() else "", json.loads(kept.read_text()) if kept.exists() else {}


def _measured(text: str) -> str:
    found = re.findall(r"\{preset: \"4K_elements\".*\}", text)
    assert len(found) == 1, text
    return found[0]


def test_the_file_holds_both_plugins_measured_alike(real_run):
    status, text, _ = real_run
    assert status == 0, text
    assert '  - op: "add"\n    dispatch_key: "CPU"\n    mode: "eager"\n' in text, text
    figure = _measured(text)
    median = re.search(r'median_us: \{"cpu": ([0-9.e+-]+), "triton": ([0-9.e+-]+)\}', figure)
    assert median and float(median.group(1)) > 0 and float(median.group(2)) > 0, figure
    assert "repetitions: {cpu: 3, triton: 3}" in figure and "p_faster: {triton: " in figure, figure


def test_the_kept_json_holds_the_triton_rows_as_the_engines(real_run):
    _, _, results = real_run
    entries = [e for e in results["benchmarks"] if e["name"] == ROW]
    assert len(entries) == 3 and all(e["real_time"] > 0 and not e.get("error_occurred") for e in entries), entries
    assert results["context"]["shared_rows.triton"] == "cpu"
    assert results["context"]["backend.triton"].endswith("(version 0.1.0, key CPU, device cpu)")


def test_deciding_again_from_the_kept_json_writes_the_same_entries(real_run, tmp_path):
    _, text, results = real_run
    kept = tmp_path / "run.json"
    kept.write_text(json.dumps(results))
    out = tmp_path / "again.yaml"
    assert tune.main(["--backends", "cpu,triton", "--from-json", str(kept), "--out", str(out)]) == 0
    assert out.read_text().split("\nops:\n")[1] == text.split("\nops:\n")[1]


def test_loading_the_file_selects_as_it_says(real_run, tmp_path):
    _, text, _ = real_run
    winner = re.search(r'- \{plugin: "(\w+)"', text).group(1)
    out = tmp_path / "sel.yaml"
    out.write_text(text)
    _load_with(out)
    [add] = [s for s in backplane.serving() if s.op == "add" and s.dispatch_key == "CPU"]
    assert add.serving == winner and str(out) in add.why, add
    assert set(add.offered_by) == {"cpu", "triton"}, add


def _load_with(selection):
    with warnings.catch_warnings():  # "offered by 'cpu', 'triton'": the very thing the file decides
        warnings.simplefilter("ignore")
        backplane.load("cpu", "triton", selection=str(selection))


class _ForcedTimes:
    """The engine's cpu rows and the Python timer's triton rows at chosen times (µs per
    repetition), counting the timer's calls and keeping what it was asked."""

    def __init__(self, monkeypatch, engine_run: dict, cpu_us, triton_us):
        self.calls, self.engine_calls = [], []
        monkeypatch.setattr(bench, "run", self._engine(engine_run, cpu_us))
        monkeypatch.setattr(compiled, "time_step", self._timer(triton_us))

    def _engine(self, engine_run, cpu_us):
        def run(backends, *args, **kwargs):
            self.engine_calls.append((list(backends), kwargs.get("cuda_graph")))
            results = copy.deepcopy(engine_run)
            results["benchmarks"] = [e for e in results["benchmarks"] if "/triton/" not in e["name"]]
            for key in [k for k in results["context"] if k.endswith(".triton") or k == "triton_rows"]:
                del results["context"][key]
            timed = iter(cpu_us)
            for e in results["benchmarks"]:
                if e["name"].startswith("add/cpu/backplane/") and e["run_type"] == "iteration":
                    e["real_time"], e["time_unit"] = next(timed), "us"
            return results
        return run

    def _timer(self, triton_us):
        def time_step(step, device, rule, *, repetitions=1, cuda_graph=False, cold_l2=False):
            self.calls.append((str(device), rule, repetitions, cuda_graph))
            return [Sampled(us * 1e-6, 0.0, 5, 0.01, 1) for us in triton_us[:repetitions]]
        return time_step


def _forced(monkeypatch, real_run, tmp_path, cpu_us, triton_us, *flags):
    status, _, results = real_run
    assert status == 0
    forced = _ForcedTimes(monkeypatch, results, cpu_us, triton_us)
    out = tmp_path / "forced.yaml"
    assert tune.main(["--backends", "cpu,triton", *FAST, *flags, "--out", str(out)]) == 0
    return forced, out.read_text()


def test_triton_takes_the_size_where_it_is_faster(monkeypatch, real_run, tmp_path):
    forced, text = _forced(monkeypatch, real_run, tmp_path, [10.0, 10.1, 10.2], [5.0, 5.05, 5.1])
    assert forced.engine_calls == [(["cpu"], False)]  # the engine times the library backend only
    # One timed row of 3 repetitions, under the engine's stop rule as --min-time/--max-time set it.
    [(device, rule, repetitions, cuda_graph)] = forced.calls
    assert (device, repetitions, cuda_graph) == ("cpu", 3, False)
    assert (rule.min_seconds, rule.max_seconds) == (0.01, 0.02)
    assert '      - {plugin: "triton", measured: [' in text, text
    # 3 against 3, each faster: the least p of the test's normal approximation with its
    # continuity correction, z = (4.5 - 0.5) / sqrt(9 * 7 / 12), one-sided 0.0404 < 0.05.
    assert 'median_us: {"cpu": 10.1, "triton": 5.05}, repetitions: {cpu: 3, triton: 3}, ' \
           'p_faster: {triton: 0.0404}' in _measured(text)
    # The environment records the triton plugin as the core checks it: its manifest's sha256.
    [record] = [b for b in backplane.backends() if b.name == "triton"]
    digest = hashlib.sha256(Path(record.path).read_bytes()).hexdigest()
    assert f'    - {{name: "triton", version: "0.1.0", sha256: "{digest}"}}' in text, text
    selection = tmp_path / "forced.yaml"
    _load_with(selection)
    [add] = [s for s in backplane.serving() if s.op == "add" and s.dispatch_key == "CPU"]
    assert add.serving == "triton", add


def test_a_file_made_with_another_triton_build_is_said_when_applied(monkeypatch, real_run, tmp_path):
    _, text = _forced(monkeypatch, real_run, tmp_path, [10.0, 10.1, 10.2], [5.0, 5.05, 5.1])
    other = tmp_path / "other.yaml"
    other.write_text(re.sub(r'(name: "triton", version: "0.1.0", sha256: ")[0-9a-f]{64}', r"\g<1>" + "0" * 64, text))
    with pytest.warns(UserWarning, match=r"plugin triton file .*libbackplane_triton\.manifest\.yaml: sha256 "
                                         r"000000000000\.\.\. there, [0-9a-f]{12}\.\.\. here \(another build\)"):
        backplane.apply_selection(other)


# Within the margin: 2% faster, every repetition below the incumbent's (significant).
# Within the noise: 20% faster in the median, one repetition slower than all the incumbent's:
# z = (|6 - 4.5| - 0.5) / sqrt(9 * 7 / 12), one-sided p 0.3313.
@pytest.mark.parametrize("triton_us,median,p", [([9.8, 9.85, 9.9], 9.85, 0.0404), ([8.0, 10.5, 8.1], 8.1, 0.3313)],
                         ids=["within the margin", "within the noise"])
def test_a_near_tie_keeps_the_incumbent_in_graph_mode_too(monkeypatch, real_run, tmp_path, capsys, triton_us, median,
                                                          p):
    forced, text = _forced(monkeypatch, real_run, tmp_path, [10.0, 10.1, 10.2], triton_us, "--mode", "graph")
    assert forced.engine_calls == [(["cpu"], True)]
    assert [c[2:] for c in forced.calls] == [(3, False)]  # the cpu reference rows were not graphed: nor is triton's
    assert '      - {plugin: "cpu", measured: [' in text and 'plugin: "triton"' not in text, text
    assert (f'median_us: {{"cpu": 10.1, "triton": {median}}}, repetitions: {{cpu: 3, triton: 3}}, '
            f'p_faster: {{triton: {p}}}') in _measured(text)
    said = capsys.readouterr().err
    assert "add on CPU: --mode graph times cuda rows only; timed as eager calls (mode: eager)" in said, said


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_triton_alone_is_refused_as_bench_refuses_it(mode, capsys):
    assert tune.main(["--backends", "triton", "--mode", mode, *FAST]) == 2
    assert capsys.readouterr().err == (
        "backplane tune: --backends triton: triton plugins only; their rows are read against the reference and copy_ "
        "rows the engine times for a library backend on their device: name one beside them (--backends cuda,triton; "
        "cpu,triton under TRITON_INTERPRET=1)\n")


def _listed_as(monkeypatch, **changes):
    records = [b if b.name != "triton" else dataclasses.replace(b, **changes) for b in backplane.backends()]
    monkeypatch.setattr(backplane, "backends", lambda: records)


def test_a_triton_plugin_on_a_device_no_library_backend_serves_is_refused(monkeypatch):
    _listed_as(monkeypatch, dispatch_key="CUDA", status="available")  # as on a GPU machine without the interpreter
    assert tune_triton.refusal(["cpu", "triton"], "cpu,triton", "eager") == (
        "--backends cpu,triton: triton serves CUDA, where none of cpu does; its rows are read against the reference "
        "and copy_ rows the engine times for a library backend on its device: name one beside it (--backends "
        "cuda,triton)")
    assert tune_triton.refusal(["cpu", "triton"], "cpu,triton", "compile") == ""  # inductor is its rival there
    assert tune_triton.refusal(["cpu", "triton"], "cpu,triton", "eager", timing=False) == ""  # --from-json


def test_a_triton_plugin_that_cannot_serve_is_refused_with_its_reason(monkeypatch, capsys):
    _listed_as(monkeypatch, status="unavailable", reason="no CUDA device: Triton compiles its kernels for CUDA")
    assert tune.main(["--backends", "cpu,triton", *FAST]) == 2
    assert capsys.readouterr().err == ("backplane tune: --backends cpu,triton: triton cannot serve here (unavailable): "
                                       "no CUDA device: Triton compiles its kernels for CUDA\n")


def test_in_compile_mode_triton_is_a_candidate_as_a_library_plugin(tmp_path):
    # Alone: its rival is inductor. Forced by a one-bucket file and compiled like any plugin
    # (under the interpreter the core's call is kept in the graph, not traced).
    out = tmp_path / "compiled.yaml"
    assert tune.main(["--mode", "compile", "--backends", "triton", *FAST, "--out", str(out)]) == 0
    text = out.read_text()
    assert '  - op: "add"\n    dispatch_key: "CPU"\n    mode: "compile"\n' in text, text
    assert re.search(r'median_us: \{"inductor": [0-9.e+-]+, "triton": [0-9.e+-]+\}, '
                     r'repetitions: \{inductor: 3, triton: 3\}', _measured(text)), text


def test_a_triton_row_that_fails_leaves_the_size_to_the_incumbent(monkeypatch, real_run, tmp_path, capsys):
    forced = _ForcedTimes(monkeypatch, real_run[2], [10.0, 10.1, 10.2], [])

    def failing(*args, **kwargs):
        raise RuntimeError("backplane::add: the launcher of the triton plugin 'triton' raised ValueError: no grid")

    monkeypatch.setattr(compiled, "time_step", failing)
    out = tmp_path / "failed.yaml"
    assert tune.main(["--backends", "cpu,triton", *FAST, "--out", str(out)]) == 0
    assert forced.engine_calls == [(["cpu"], False)]
    text = out.read_text()
    assert '      - {plugin: "cpu", measured: [' in text and "triton" not in _measured(text), text
    assert (f"backplane bench: {ROW}: RuntimeError: backplane::add: the launcher of the triton plugin 'triton' raised "
            "ValueError: no grid\n") in capsys.readouterr().err
