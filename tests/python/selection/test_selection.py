"""Two CPU plugins serving one device: cpu and the fixture cpu_alt, whose identity_conv
returns -x. Each test runs in a child process, so this session's plugins stay as they are."""
import os
from pathlib import Path

import pytest

from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
FIXTURES = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane")).parent.parent / "tests" / "fixtures"

PROGRAMS = Path(__file__).with_name("programs")


def run(program, **env):
    """Runs programs/`program`, which starts with programs/cpu_and_cpu_alt.py (cpu, then cpu_alt)."""
    r = run_python(PROGRAMS / program, FIXTURES, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_conflict_is_announced_and_first_loaded_serves():
    out = run("conflict_first_loaded_serves.py")
    assert "ok" in out


def test_prefer_switches_at_once_and_as_a_context_manager():
    run("prefer_switches_at_once.py")


def test_environment_preference():
    run("preferred_from_environment.py", BACKPLANE_PREFER="identity_conv:cpu_alt,cpu")


@pytest.mark.slow
def test_compiled_code_honours_a_switch():
    run("compiled_code_honours_a_switch.py")


def test_check_runs_the_named_plugin_even_when_another_serves():
    run("check_runs_the_named_plugin.py")


def test_bad_preference_is_a_clear_error():
    run("prefer_bad_preference.py")


@pytest.mark.parametrize("named", ["identity_conv", "add"])
def test_a_selection_file_loaded_with_the_plugins_silences_only_the_conflicts_it_decides(tmp_path, named):
    file = tmp_path / "sel.yaml"
    file.write_text(f"backplane_selection: 1\nops:\n  - {{op: {named}, dispatch_key: CPU, buckets: [{{plugin: cpu_alt}}]}}\n")
    expect = "decided" if named == "identity_conv" else "undecided"
    r = run_python(PROGRAMS / "load_with_selection_warns_only_undecided.py", FIXTURES, file, expect)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
