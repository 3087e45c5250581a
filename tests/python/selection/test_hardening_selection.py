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
from test_selection import run

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
    run("""
backplane.prefer("identity_conv", "cpu_alt")
backplane.prefer("backplane::identity_conv", None)
assert backplane.preferences() == "", backplane.preferences()
assert torch.equal(ident(x), x)
backplane.prefer("backplane::identity_conv", "cpu_alt")
assert backplane.preferences() == "identity_conv:cpu_alt", backplane.preferences()
backplane.prefer("backplane::identity_conv")
assert backplane.preferences() == ""
""")


def test_with_blocks_on_two_threads_are_undone_exactly_in_any_order():
    # A enters, B enters, A leaves (B's preference stays), B leaves (none stays).
    run("""
import threading
steps = {name: threading.Event() for name in ("a_in", "b_in", "a_out")}
seen = {}
def a():
    with backplane.prefer("identity_conv", "cpu_alt"):
        steps["a_in"].set()
        steps["b_in"].wait(60)
    steps["a_out"].set()
def b():
    steps["a_in"].wait(60)
    with backplane.prefer("identity_conv", "cpu"):
        steps["b_in"].set()
        steps["a_out"].wait(60)
        seen["inside b after a left"] = backplane.preferences()
threads = [threading.Thread(target=f) for f in (a, b)]
for t in threads: t.start()
for t in threads: t.join(60)
assert seen == {"inside b after a left": "identity_conv:cpu"}, seen
assert backplane.preferences() == "", "no block's preference may outlive it: " + backplane.preferences()
assert torch.equal(ident(x), x)
""")


def test_many_threads_leave_the_preference_they_found():
    run("""
import threading
backplane.prefer("identity_conv", "cpu_alt")  # for good: every block must come back to it
def worker(i):
    for n in range(200):
        with backplane.prefer("identity_conv", "cpu" if (i + n) % 2 else "cpu_alt", "cpu"):
            with backplane.prefer("*", "cpu"):
                pass
threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join(120)
assert backplane.preferences() == "identity_conv:cpu_alt", backplane.preferences()
assert torch.equal(ident(x), -x)
""")


def test_a_plain_call_inside_a_block_outlives_it():
    run("""
with backplane.prefer("identity_conv", "cpu"):
    backplane.prefer("identity_conv", "cpu_alt")  # newer, for good
    assert torch.equal(ident(x), -x)
assert backplane.preferences() == "identity_conv:cpu_alt", backplane.preferences()
p = backplane.prefer("identity_conv", "cpu")
with p:
    assert torch.equal(ident(x), x)
assert torch.equal(ident(x), -x), "a block withdraws the object's preference"
with p:  # entered again: applies again
    assert torch.equal(ident(x), x)
assert backplane.preferences() == "identity_conv:cpu_alt"
""")


def test_entering_a_block_again_inside_itself_keeps_the_outer_preference():
    # Issue 45, item 16: the inner exit used to withdraw the one hold both shared.
    run("""
p = backplane.prefer("identity_conv", "cpu_alt")
with p:
    with p:
        assert torch.equal(ident(x), -x)
    assert backplane.preferences() == "identity_conv:cpu_alt", "the outer block's preference stays for its rest"
    assert torch.equal(ident(x), -x)
    with p, p:
        pass
    assert backplane.preferences() == "identity_conv:cpu_alt"
assert backplane.preferences() == "", backplane.preferences()
assert torch.equal(ident(x), x)
""")


def test_bad_preferences_raise_value_error_naming_the_spec():
    run("""
import pytest
def refused(match, *args, error=ValueError):
    with pytest.raises(error, match=match) as caught:
        backplane.prefer(*args)
    assert "internal error" not in str(caught.value), caught.value
    assert backplane.preferences() == "identity_conv:cpu_alt", "a refused preference changes nothing"
backplane.prefer("identity_conv", "cpu_alt")
refused(r"preference 'nosuch:cpu': no op 'nosuch' in the registry", "nosuch", "cpu")
refused(r"preference 'identity_conv:a,b': 'a,b' is not a plugin name", "identity_conv", "a,b")
refused(r"preference 'identity_conv:': '' is not a plugin name", "identity_conv", "")
refused(r"preference 'identity_conv:core': 'core' is not a plugin name", "identity_conv", "core")
refused(r"preference 'acme::a;b:cpu': 'acme::a;b' is not an op name", "acme::a;b", "cpu")
refused(r"the op name holds a NUL", "identity_conv\\x00x", "cpu")
refused(r"takes strings", 3, "cpu", error=TypeError)
refused(r"takes strings", "identity_conv", "cpu", None, error=TypeError)
""")


# --- check() and `backplane check` ---------------------------------------------------

def test_check_refuses_an_unknown_op_naming_the_known():
    run("""
import pytest
for ops in ("nope", ["add", "nope"]):
    with pytest.raises(ValueError, match=r"^check: no op 'nope' in the registry or a loaded plugin's fragment; known: "
                       ) as caught:
        backplane.check("cpu", ops)
    known = set(str(caught.value).split("known: ")[1].split(", "))
    assert known == {op.name for op in backplane.ops()}, known
assert {r.op for r in backplane.check("cpu", "backplane::add")} == {"add"}
""")


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
