"""The fuzz job of tune's JSON reader (tests/fuzz/tune_json_reader.py, run by
scripts/fuzz.sh) on a few inputs: it runs, and a finding fails it with the input kept."""
import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "fuzz" / "tune_json_reader.py"
_spec = importlib.util.spec_from_file_location("tune_json_reader", _PATH)
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


def test_a_short_seeded_run_finds_nothing(tmp_path, capsys):
    # --seconds far past the count's time: the count alone ends the run, however loaded the machine.
    assert fuzz.main(["--seed", "7", "--count", "300", "--seconds", "100000", "--artifacts", str(tmp_path)]) == 0
    assert "tune_json_reader: seed 7: 300 inputs in " in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_an_exception_other_than_the_readers_is_a_finding(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fuzz.tune, "decide", lambda *a: 1 / 0)
    assert fuzz.main(["--seed", "7", "--count", "300", "--seconds", "100000", "--artifacts", str(tmp_path)]) == 1
    assert "ZeroDivisionError" in capsys.readouterr().err
    (kept,) = tmp_path.iterdir()
    assert kept.name.startswith("tune_json-7-") and kept.suffix == ".json"
