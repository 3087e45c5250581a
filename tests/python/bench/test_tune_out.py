"""The file `backplane tune` writes (python/backplane/bench/selection_file.py): --out checked before
any timing, every string quoted, the text read back by the core, and the file it replaces
kept whole whatever fails. Run here on made-up figures (--from-json, tune_runs.py)."""
import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

import backplane
from backplane import bench
from backplane.bench import selection_file, tune
from bench_runs import no_run
from conftest import child_env
from tune_runs import context, figures, row, tune_in_process, two_sizes

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
OLD = "# the selection file in use\n"

# The plugins here are names only, so the core's read-back says they are not loaded.
pytestmark = pytest.mark.filterwarnings("ignore:.*names plugins that are not loaded")


@pytest.fixture
def old(tmp_path):
    """A selection file in use, which tune is to replace."""
    path = tmp_path / "sel.yaml"
    path.write_text(OLD)
    return path


def _refused(capsys, status, old):
    """tune's message, after checking it exited 2 and left `old` as it was."""
    assert status == 2
    assert old.read_text() == OLD
    assert [p.name for p in old.parent.iterdir() if p.name.endswith(".tmp")] == [], "a temporary file was left"
    return capsys.readouterr().err


@pytest.mark.parametrize("out, found", [
    ("{tmp}", "--out {tmp}: is a directory; expected the selection file's name"),
    ("{tmp}/missing/sel.yaml", "--out {tmp}/missing/sel.yaml: no directory {tmp}/missing to write it in"),
    ("/dev/null", "--out /dev/null: is not a regular file (a FIFO or a device, say)"),
    ("{tmp}/run.json", "--out {tmp}/run.json would replace the figures of --json {tmp}/run.json"),
])
def test_out_is_refused_before_any_timing(out, found, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "run", no_run)
    out = out.format(tmp=tmp_path)
    assert tune.main(["--backends", "a,b", "--json", str(tmp_path / "run.json"), "--out", out]) == 2
    assert f"backplane tune: {found.format(tmp=tmp_path)}" in capsys.readouterr().err


def test_out_onto_the_from_json_figures_is_refused(tmp_path, monkeypatch, capsys):
    run = figures(tmp_path / "run.json", two_sizes())
    kept = run.read_text()
    assert tune_in_process(monkeypatch, "--from-json", run, "--out", run) == 2
    assert f"--out {run} would replace the figures of --from-json {run}" in capsys.readouterr().err
    assert run.read_text() == kept


def test_a_file_name_in_another_encoding_is_written_and_named(tmp_path, monkeypatch, old, capsys):
    # sys.argv holds a Latin-1 name's byte as a surrogate escape, which UTF-8 cannot encode:
    # tune opened --out, then failed writing the command into it, leaving it empty.
    run = figures(Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9.json")), two_sizes())
    assert tune_in_process(monkeypatch, "--from-json", run, "--out", old) == 0
    text = old.read_text(encoding="utf-8")
    assert f'made_by: {{command: "backplane tune --backends a,b --from-json {tmp_path}/caf\\\\xe9.json --out ' in text
    assert f"wrote {old}" in capsys.readouterr().out


def test_a_lone_surrogate_in_the_figures_is_written_escaped(tmp_path, monkeypatch, old):
    # JSON may hold a lone surrogate ("\ud800"), which no file encoding holds
    run = figures(tmp_path / "run.json", two_sizes(), {**context("a", "b"), "cpu_model": "x\ud800"})
    assert tune_in_process(monkeypatch, "--from-json", run, "--out", old) == 0
    assert 'machine: "x\\\\ud800"' in old.read_text(encoding="utf-8")


def test_a_file_the_core_refuses_is_never_put_in_place(tmp_path, monkeypatch, old, capsys):
    # "key null" in the run's context: quoted, the dispatch key is the string "null",
    # which the core's reader refuses; before, tune wrote `dispatch_key: null` and exited 0.
    run = figures(tmp_path / "run.json", two_sizes(), context("a", "b", key="null"))
    err = _refused(capsys, tune_in_process(monkeypatch, "--from-json", run, "--out", old), old)
    assert (f"backplane tune: --out {old}: the core refuses the selection file made from these figures, so {old} is "
            f"left as it was: {old}:") in err
    assert "dispatch_key: expected a dispatch key such as CPU, CUDA or PrivateUse1, found 'null'" in err


def test_a_failed_write_keeps_the_old_file_whole(tmp_path, monkeypatch, old, capsys):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(selection_file.os, "fsync", full)
    run = figures(tmp_path / "run.json", two_sizes())
    err = _refused(capsys, tune_in_process(monkeypatch, "--from-json", run, "--out", old), old)
    assert f"backplane tune: --out {old}: cannot write it: No space left on device" in err


def test_a_link_as_out_replaces_the_file_it_names_with_its_permissions(tmp_path, monkeypatch, old):
    old.chmod(0o640)
    link = tmp_path / "link.yaml"
    link.symlink_to(old)
    assert tune_in_process(monkeypatch, "--from-json", figures(tmp_path / "run.json", two_sizes()), "--out", link) == 0
    assert link.is_symlink() and old.read_text().startswith("# Which plugin serves each op")
    assert oct(old.stat().st_mode & 0o777) == "0o640"


def test_the_selection_in_force_is_kept_after_the_read_back(tmp_path, monkeypatch):
    run, first = figures(tmp_path / "run.json", two_sizes()), tmp_path / "first.yaml"
    assert tune_in_process(monkeypatch, "--from-json", run, "--out", first) == 0
    backplane.apply_selection(first)
    try:
        assert tune_in_process(monkeypatch, "--from-json", run, "--out", tmp_path / "second.yaml") == 0
        assert backplane.selection_file() == str(first)
    finally:
        backplane.apply_selection(None)


@pytest.mark.parametrize("name", ["null", "NULL", "true", "on"])
def test_every_string_is_quoted(name, tmp_path):
    # Plugin names that YAML reads as null or booleans unquoted; the core refused `plugin: null`.
    decision = tune.decide({"context": context(name, "b"), "benchmarks": two_sizes(name, "b")},
                             backplane.ops(), [name, "b"])
    path = tmp_path / "sel.yaml"
    path.write_text(tune.selection_yaml(decision.entries, {"machine": name}))
    text = path.read_text()
    assert f'plugin: "{name}"' in text and f'"{name}": 1.0' in text and f'machine: "{name}"' in text
    try:
        backplane.apply_selection(path)
    finally:
        backplane.apply_selection(None)


def test_unprintable_text_stays_on_its_line_and_is_read_back(tmp_path):
    text = 'a\n"b"\\\x00\u2028\U000e0001'
    assert selection_file.quoted(text) == '"a\\x0a\\"b\\"\\\\\\x00\\u2028\\U000e0001"'
    path = tmp_path / "sel.yaml"
    path.write_text(tune.selection_yaml([], {"machine": text}))
    assert len(path.read_text().splitlines()) == 6
    try:
        backplane.apply_selection(path)
    finally:
        backplane.apply_selection(None)


def test_left_out_sizes_are_said_and_written_as_comments(tmp_path, monkeypatch, old, capsys):
    run = figures(tmp_path / "run.json", [*two_sizes(), row("add", "b", "64M_elements", 600.0)])
    assert tune_in_process(monkeypatch, "--from-json", run, "--out", old) == 0
    note = "add on CPU: 67108864 elements: no row of a at 64M_elements float32"
    err = capsys.readouterr().err
    assert f"backplane tune: not decided: {note}\n" in err
    assert "a call of a size not decided takes the range that covers it" in err
    assert f"# Not decided: {note}\n" in old.read_text()


def test_the_cli_writes_a_latin1_file_name_through_to_the_core(tmp_path):
    # The whole path: bytes in argv, through the C++ command and `python -m backplane tune`.
    run = figures(Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9.json")), two_sizes("cpu_alt", "cpu"),
                  backends=("cpu_alt", "cpu"))
    out = tmp_path / "sel.yaml"
    out.write_text(OLD)
    done = subprocess.run([str(BACKPLANE), "tune", "--plugin-dir", str(BACKPLANE.parent.parent / "tests" / "fixtures"),
                           "--backends", "cpu_alt,cpu", "--from-json", run, "--out", str(out)],
                          capture_output=True, env=child_env(BACKPLANE_PYTHON=sys.executable), timeout=300)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    assert b"caf\\\\xe9.json" in out.read_bytes()
