"""Issue 32, items 11, 13 and 15 (and issue 45, item 16: a block entered again inside itself):
prefer() undone exactly and its errors named, check()
refusing an unknown op, `backplane check` on a backend with no device, and
BACKPLANE_BACKENDS read by one rule in Python and in the `backplane` command."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import child_env, run_python
from test_selection import run  # programs/<name> after programs/cpu_and_cpu_alt.py

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
CUDA_PLUGIN = BACKPLANE.parent.parent / "lib" / "libbackplane_cuda.so"


def clean_env(**extra):
    return child_env(PYTHONPATH=str(REPO / "python"), **extra)


def cli(*args, **env):
    return subprocess.run([str(BACKPLANE), *args], capture_output=True, text=True, env=clean_env(**env), timeout=300)


def python(code, **env):
    return run_python(code, env=env)


# --- prefer() -------------------------------------------------------------------------

def test_clearing_a_qualified_op_clears_it():
    run("prefer_cleared_by_qualified_name.py")


def test_with_blocks_on_two_threads_are_undone_exactly_in_any_order():
    # A enters, B enters, A leaves (B's preference stays), B leaves (none stays).
    run("prefer_blocks_on_two_threads.py")


def test_many_threads_leave_the_preference_they_found():
    run("prefer_blocks_on_many_threads.py")


def test_a_plain_call_inside_a_block_outlives_it():
    run("prefer_plain_call_inside_a_block.py")


def test_entering_a_block_again_inside_itself_keeps_the_outer_preference():
    # Issue 45, item 16: the inner exit used to withdraw the one hold both shared.
    run("prefer_block_entered_inside_itself.py")


def test_bad_preferences_raise_value_error_naming_the_spec():
    run("prefer_bad_specs.py")


# --- check() and `backplane check` ---------------------------------------------------

def test_check_refuses_an_unknown_op_naming_the_known():
    run("check_unknown_op.py")


needs_cuda_plugin = pytest.mark.skipif(not CUDA_PLUGIN.is_file(), reason="the cuda plugin is not built")


@needs_cuda_plugin
def test_check_of_a_named_backend_without_its_device_fails():
    # CUDA_VISIBLE_DEVICES="": no device, even on a GPU machine.
    for args in (["cuda"], ["--backends", "cuda"]):
        r = cli("check", *args, CUDA_VISIBLE_DEVICES="")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "every implemented op passed" not in r.stdout
        assert r.stdout.splitlines()[-1] == ("nothing was checked: cuda (no cuda device is present) "
                                             "(--allow-missing-device to pass without a device)"), r.stdout
    r = cli("check", "cuda", "--allow-missing-device", CUDA_VISIBLE_DEVICES="")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "nothing was checked: cuda (no cuda device is present)"
    r = cli("check", "cpu", "cuda", "--ops", "add", CUDA_VISIBLE_DEVICES="")
    assert r.returncode == 1 and r.stdout.splitlines()[-1] == (
        "every implemented op passed against PyTorch; not checked: cuda (no cuda device is present) "
        "(--allow-missing-device to pass without a device)"), r.stdout
    r = cli("check", "--json", "--backends", "cuda", CUDA_VISIBLE_DEVICES="")
    assert r.returncode == 1 and "backplane check: nothing was checked: cuda" in r.stderr, r.stderr


@needs_cuda_plugin
def test_check_of_discovered_backends_lists_the_unchecked_one_and_passes():
    r = cli("check", "--ops", "add", CUDA_VISIBLE_DEVICES="")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not checked: cuda (no cuda device is present)" in r.stdout.splitlines()[-1], r.stdout


def test_check_that_checks_nothing_fails():
    r = cli("check", "--backends", "none")
    assert r.returncode == 1 and r.stdout.splitlines()[-1] == "nothing was checked: no backend selected", r.stdout
    assert cli("check", "--backends", "none", "--allow-missing-device").returncode == 1


def test_check_help_documents_allow_missing_device():
    r = cli("check", "--help")
    assert r.returncode == 0 and "--allow-missing-device" in r.stdout


# --- BACKPLANE_BACKENDS ----------------------------------------------------------------

EXPECTED = "expected backend names separated by ',' ('none' loads none; unset it to load every plugin found)"


@pytest.mark.parametrize("value, message", [
    ("", "BACKPLANE_BACKENDS='' names no backend: " + EXPECTED),
    (",,,", "BACKPLANE_BACKENDS=',,,' names no backend: " + EXPECTED),
    ("cpu,,npu", "BACKPLANE_BACKENDS='cpu,,npu' has an empty entry: " + EXPECTED),
    ("cpu, ", "BACKPLANE_BACKENDS='cpu, ' has an empty entry: " + EXPECTED),
    ("cpu,none", "BACKPLANE_BACKENDS='cpu,none': 'none' loads no backend, so it stands alone"),
])
def test_a_malformed_backend_variable_is_refused_alike_by_python_and_the_command(value, message):
    done = python("import backplane", BACKPLANE_BACKENDS=value)
    assert done.returncode != 0
    assert f"backplane._native.BackendNameError: {message}" in done.stderr, done.stderr[-2000:]
    r = cli("check", BACKPLANE_BACKENDS=value)
    assert r.returncode == 1 and r.stderr.strip() == f"backplane check: {message}", r.stderr


def test_none_loads_no_backend_in_python_and_the_command():
    done = python("import backplane; print(sorted(b.name for b in backplane.backends() if b.status == 'loaded'))",
                  BACKPLANE_BACKENDS="none")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    r = cli("ops", "--json", BACKPLANE_BACKENDS="none")
    assert r.returncode == 0, r.stderr
    assert all(row["backends"] == [] for row in json.loads(r.stdout)["ops"])


def test_the_backends_flag_takes_the_same_rule():
    r = cli("check", "--backends", "cpu,,npu")
    assert r.returncode == 2
    assert ("backplane check: --backends 'cpu,,npu' has an empty entry: expected backend names separated by ',' "
            "('none' loads none)") in r.stderr
    r = cli("check", "--backends", "none,cpu")
    assert r.returncode == 2 and "--backends 'none,cpu': 'none' loads no backend, so it stands alone" in r.stderr
    r = cli("check", "--backends", " cpu ", "--ops", "add")
    assert r.returncode == 0, r.stderr
