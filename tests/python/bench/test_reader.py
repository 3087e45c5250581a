"""The bench JSON reader (python/backplane/bench/results.py) against times and texts that
pass a naive check: a time > 0 that is 0 once converted, numbers and nesting beyond
Python's own limits. Each is refused naming the file and the row, by `bench --input` in
every view and by `tune --from-json` alike, never a traceback."""
import json

import pytest

from backplane import bench
from bench_runs import fake_run
from tune_runs import figures, row, tune_in_process, two_sizes

_ROW = "add/cpu/backplane/1M_elements_float32"


def _run_with(tmp_path, real_time, unit):
    """A run whose backplane row takes `real_time` in `unit` at each repetition."""
    run = fake_run((5.0, 5.0, 5.0))
    for entry in run["benchmarks"][:3]:
        entry.update(real_time=real_time, time_unit=unit)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    return path


@pytest.mark.parametrize("real_time, unit, found", [
    (5e-324, "ns", "real_time 5e-324 ns is 0 µs and 0 ns; expected a finite time > 0 in both"),
    (1e306, "s", "real_time 1e+306 s is inf µs and inf ns; expected a finite time > 0 in both"),
    (1e306, "us", "real_time 1e+306 us is 1e+306 µs and inf ns; expected a finite time > 0 in both"),
    (10 ** 400, "us", f"real_time {10 ** 400!r} is not a time > 0"),
])
@pytest.mark.parametrize("view", [[], ["--markdown"], ["--side-by-side"]])
def test_a_time_that_converts_to_zero_or_infinity_is_refused_in_every_view(real_time, unit, found, view, tmp_path,
                                                                             capsys):
    path = _run_with(tmp_path, real_time, unit)
    assert bench.main(["--input", str(path), *view]) == 2
    assert f"backplane bench: {path}: benchmarks[0] ({_ROW}): {found}" in capsys.readouterr().err


def test_tune_from_json_refuses_a_time_that_converts_to_zero(tmp_path, monkeypatch, capsys):
    run = figures(tmp_path / "run.json", [row("add", "a", "4K_elements", 5e-324, unit="ns"), *two_sizes()[1:]])
    assert tune_in_process(monkeypatch, "--from-json", run, "--out", tmp_path / "sel.yaml") == 2
    assert (f"backplane tune: --from-json: expected the benchmark engine's JSON, found: {run}: benchmarks[0] "
            "(add/a/backplane/4K_elements_float32): real_time 5e-324 ns is 0 µs and 0 ns") in capsys.readouterr().err
    assert not (tmp_path / "sel.yaml").exists()


@pytest.mark.parametrize("text, found", [
    ('{"benchmarks": [{"name": "%s", "real_time": 5.0, "time_unit": ["us"]}]}' % _ROW,
     f"benchmarks[0] ({_ROW}): time_unit ['us'] is not one of ns, us, ms, s"),
    ("[" * 100000, "not a backplane bench (Google Benchmark) JSON file: nested deeper than Python's recursion limit"),
    ('{"benchmarks": [%s]}' % ("1" * 5000), "not a backplane bench (Google Benchmark) JSON file: Exceeds the limit"),
])
def test_what_python_cannot_hold_is_refused_naming_the_file(text, found, tmp_path):
    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(ValueError) as refused:
        bench.load(path)
    assert str(refused.value).startswith(f"{path}: {found}")
