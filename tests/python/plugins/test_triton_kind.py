"""Plugins of kind triton (python/backplane/triton_kind.py, python/src/python_kernels.cpp):
a Python package whose launchers the core wraps and offers like a library's kernels. The
fixture tests/fixtures/triton_kind (add, mul) runs under TRITON_INTERPRET=1 on the CPU, as
CI without a GPU tests a triton plugin: it serves through torch.ops.backplane.* with the
core's contract, shares the CPU key with cpu through the core's selection, passes the
conformance suite; where it cannot serve it is `unavailable` with the reason; a package
serving an op its manifest does not list is refused naming both; a launcher's exception is
an error naming op and plugin. Each scenario runs in a fresh process: loading is for good."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURE = REPO / "tests" / "fixtures" / "triton_kind"
PROGRAMS = Path(__file__).with_name("programs")
PACKAGE = "backplane_fixture_triton"
INTERPRET = {"TRITON_INTERPRET": "1", "BACKPLANE_BACKENDS": "none"}

try:
    import triton  # noqa: F401
    HAVE_TRITON = True
except ImportError:
    HAVE_TRITON = False
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="the triton module is not installed")


def _ok(done):
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


def _plugin(tmp_path, *, ops="[add, mul]", serves=None, package_body=None, name="tk"):
    """A triton plugin `name` in tmp_path: the fixture's package copied (or package_body),
    kernels() limited to `serves` when given, and a manifest listing `ops`."""
    package = tmp_path / f"pkg_{name}"
    if package_body is None:
        shutil.copytree(FIXTURE / PACKAGE, package)
        if serves is not None:
            with open(package / "__init__.py", "a") as f:
                f.write(f"\n_all = kernels\n\ndef kernels():\n    k = _all()\n    return {{op: k.get(op, k['add']) for op in {serves!r}}}\n")
    else:
        package.mkdir()
        (package / "__init__.py").write_text(package_body)
    (tmp_path / f"libbackplane_{name}.manifest.yaml").write_text(
        f'backplane_plugin_abi: 1\nname: {name}\nversion: "0.1"\nkind: triton\ndispatch_key: CUDA\n'
        f'python_module: pkg_{name}\npython_path: .\nops: {ops}\ntriton: ">=3.0"\ntorch: ">=2.11"\n')
    return tmp_path


def _refusal(folder, before="", after="") -> str:
    """What BackendError says when a fresh process (under the interpreter) runs `before`,
    loads the plugin tk from `folder`, then runs `after`; "" if it loaded."""
    program = (f"import backplane\n{before}\nmessage = ''\ntry:\n    backplane.load('tk', path={str(folder)!r})\n"
               f"except backplane.BackendError as e:\n    message = str(e)\n{after}\nprint(message)\n")
    return _ok(run_python(program, env=INTERPRET)).strip()


@needs_triton
def test_serves_the_cpu_key_under_the_interpreter_and_shares_it_through_the_selection(tmp_path):
    selection = tmp_path / "sel.yaml"
    selection.write_text("backplane_selection: 1\nops:\n  - op: add\n    dispatch_key: CPU\n    buckets:\n"
                         "      - {up_to: 64, plugin: fixture_triton}\n      - {plugin: cpu}\n")
    assert _ok(run_python(PROGRAMS / "triton_kind_serves_cpu.py", FIXTURE, selection, env=INTERPRET)).endswith("ok\n")


@needs_triton
def test_backplane_prefer_and_backplane_backends_choose_it_at_import():
    program = ("import torch, backplane\n"
               "s = {s.op: s for s in backplane.serving()}\n"
               "assert s['add'].serving == 'fixture_triton' and s['add'].why.startswith('preferred'), s['add']\n"
               "assert s['mul'].serving == 'cpu', s['mul']\n"
               "a = torch.randn(5)\n"
               "torch.testing.assert_close(torch.ops.backplane.add(a, a), 2 * a)\n"
               "print('ok')\n")
    env = {"TRITON_INTERPRET": "1", "BACKPLANE_BACKENDS": "cpu,fixture_triton", "BACKPLANE_PLUGIN_PATH": str(FIXTURE),
           "BACKPLANE_PREFER": "add:fixture_triton"}
    assert _ok(run_python(program, env=env, flags=("-W", "ignore"))).endswith("ok\n")


@needs_triton
def test_the_conformance_suite_passes_on_it():
    program = ("import backplane, collections, warnings\nwarnings.simplefilter('ignore')\n"
               "backplane.load('cpu'); backplane.load('fixture_triton', path=%r)\n"
               "results = backplane.check('fixture_triton', ops='add,mul')\n"
               "failed = [r for r in results if r.outcome in ('failed', 'not implemented')]\n"
               "assert not failed, failed[:3]\n"
               "c = collections.Counter(r.outcome for r in results)\n"
               "assert c['passed'] > 100 and any(r.case.startswith('gradient/') and r.outcome == 'passed' "
               "for r in results), c\n"
               "print('ok')\n") % str(FIXTURE)
    assert _ok(run_python(program, env=INTERPRET)).endswith("ok\n")


def test_without_triton_it_is_unavailable_with_the_reason_and_nothing_changes():
    out = _ok(run_python(PROGRAMS / "triton_kind_unavailable.py", FIXTURE, "no_triton", env=INTERPRET))
    assert "listed: no usable 'triton' module in this Python (import of triton halted; None in sys.modules); " \
           "install Triton (>=3.0)" in out, out


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
@needs_triton
def test_without_a_device_it_is_unavailable_unless_interpreted():
    out = _ok(run_python(PROGRAMS / "triton_kind_unavailable.py", FIXTURE, "no_device",
                         env={"BACKPLANE_BACKENDS": "none"}, unset=("TRITON_INTERPRET",)))
    assert ("listed: no CUDA device: Triton compiles its kernels for CUDA, and torch.cuda.is_available() is False "
            "here (TRITON_INTERPRET=1 runs them on the CPU, for tests only)") in out, out


@needs_triton
def test_a_package_that_does_not_import_is_unavailable_naming_it(tmp_path):
    _plugin(tmp_path, package_body="import no_such_module_here\n")
    # Listed without running it (as a library is listed without dlopen): found, so available.
    listed = ("import os, sys\nos.environ['BACKPLANE_PLUGIN_PATH'] = %r\n"
              "(b,) = [b for b in backplane.backends() if b.name == 'tk']\n"
              "assert b.status == 'available' and 'pkg_tk' not in sys.modules, b" % str(tmp_path))
    assert _refusal(tmp_path, before=listed).startswith(
        f"backend 'tk' unavailable ({tmp_path / 'libbackplane_tk.manifest.yaml'}): its package 'pkg_tk' cannot be "
        "imported: No module named 'no_such_module_here'")


@needs_triton
def test_an_op_the_manifest_does_not_list_is_refused_naming_both(tmp_path):
    _plugin(tmp_path, ops="[add]", serves=["add", "mul"])
    nothing_changed = ("s = {s.op: s.offered_by for s in backplane.serving()}\n"
                       "assert s['add'] == ('cpu',) and s['mul'] == ('cpu',), s\n"
                       "(b,) = [b for b in backplane.backends() if b.name == 'tk']\nassert b.status == 'failed', b")
    manifest = tmp_path / "libbackplane_tk.manifest.yaml"
    assert _refusal(tmp_path, "backplane.load('cpu')", nothing_changed) == (
        f"backend 'tk' failed ({manifest}): its package 'pkg_tk' serves [mul], which its manifest {manifest} does not "
        "list (it lists [add]): add them to the manifest's ops")


@needs_triton
def test_an_op_the_manifest_lists_and_the_package_lacks_is_refused(tmp_path):
    _plugin(tmp_path, ops="[add, mul]", serves=["add"])
    manifest = tmp_path / "libbackplane_tk.manifest.yaml"
    assert _refusal(tmp_path) == (
        f"backend 'tk' failed ({manifest}): its manifest {manifest} lists [mul], which its package 'pkg_tk' does not "
        "serve (its kernels() has no launcher for them): take them out of the manifest's ops")


@needs_triton
def test_a_package_whose_kernels_raise_fails_with_its_error_and_stays_failed(tmp_path):
    _plugin(tmp_path, package_body="def kernels():\n    raise RuntimeError('half-built')\n")
    again = ("try:\n    backplane.load('tk', path=%r)\n    raise AssertionError('loaded the second time')\n"
             "except backplane.BackendError as e:\n    assert str(e) == message, str(e)") % str(tmp_path)
    manifest = tmp_path / "libbackplane_tk.manifest.yaml"
    assert _refusal(tmp_path, after=again).splitlines()[0] == (
        f"backend 'tk' failed ({manifest}): its package 'pkg_tk' gave no kernels: RuntimeError: half-built")


@needs_triton
def test_an_op_no_registry_defines_is_refused(tmp_path):
    _plugin(tmp_path, ops="[add, mul, no_such_op]")
    out = _refusal(tmp_path)
    assert "rejected" in out and "manifest lists op 'no_such_op', which the registry does not define" in out, out


@needs_triton
def test_a_launcher_that_raises_or_returns_is_an_error_naming_plugin_and_op(tmp_path):
    body = ("import torch\n"
            "def add(out, a, b, alpha=1):\n    raise ValueError('no luck today')\n"
            "def mul(out, a, b):\n    return out\n"
            "def kernels():\n    return {'add': add, 'mul': mul}\n")
    _plugin(tmp_path, package_body=body)
    program = ("import torch, backplane\nbackplane.load('tk', path=%r)\na = torch.ones(3)\n"
               "for op in (torch.ops.backplane.add, torch.ops.backplane.mul):\n"
               "    try:\n        op(a, a)\n    except RuntimeError as e:\n        print(str(e).splitlines()[0])\n"
               "print('alive')\n") % str(tmp_path)
    out = _ok(run_python(program, env=INTERPRET)).splitlines()
    assert out[0] == "backplane::add: the launcher of the triton plugin 'tk' raised ValueError: no luck today", out
    assert out[1] == ("backplane::mul: the launcher of the triton plugin 'tk' returned Tensor; a launcher writes the "
                      "outputs it is given and returns None"), out
    assert out[2] == "alive"


@needs_triton
def test_found_through_a_backplane_plugins_entry_point(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(FIXTURE / PACKAGE, site / PACKAGE)
    manifest = (FIXTURE / "libbackplane_fixture_triton.manifest.yaml").read_text().replace("python_path: .\n", "")
    (site / PACKAGE / "libbackplane_fixture_triton.manifest.yaml").write_text(manifest)
    info = site / "fixture_triton-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fixture-triton\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[backplane.plugins]\nfixture_triton = {PACKAGE}\n")
    program = ("import torch, backplane\n(b,) = backplane.load('fixture_triton')\n"
               "assert b.status == 'loaded' and b.dispatch_key == 'CPU', b\n"
               "a = torch.randn(4)\ntorch.testing.assert_close(torch.ops.backplane.mul(a, a), a * a)\nprint('ok')\n")
    env = {**INTERPRET, "PYTHONPATH": f"{REPO / 'python'}:{site}"}
    assert _ok(run_python(program, env=env)).endswith("ok\n")


def test_the_cpp_command_lists_it_as_unavailable_and_still_lists_the_rest():
    env = {**os.environ, "BACKPLANE_PLUGIN_PATH": str(FIXTURE), "TRITON_INTERPRET": "1"}
    env.pop("BACKPLANE_BACKENDS", None)
    done = subprocess.run([BACKPLANE, "list", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)["backends"]}
    row = rows["fixture_triton"]
    assert (row["status"], row["kind"], row["dispatch_key"]) == ("unavailable", "triton", "CUDA"), row
    assert "its kernels are Python launchers from package 'backplane_fixture_triton'" in row["reason"], row
    assert rows["cpu"]["status"] == "loaded"
    text = subprocess.run([BACKPLANE, "list"], capture_output=True, text=True, env=env, timeout=300)
    assert text.returncode == 0 and "fixture_triton" in text.stdout and "unavailable" in text.stdout, text.stdout


@needs_triton
def test_the_cpp_command_checks_it_on_the_python_side():
    import sys

    env = {**os.environ, "BACKPLANE_PLUGIN_PATH": str(FIXTURE), "TRITON_INTERPRET": "1",
           "BACKPLANE_PYTHON": sys.executable, "PYTHONWARNINGS": "ignore"}
    env.pop("BACKPLANE_BACKENDS", None)
    done = subprocess.run([BACKPLANE, "check", "fixture_triton", "--ops", "mul", "--no-gradients"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    backend, op, passed, failed, _ = lines[1].split()
    assert (backend, op, failed) == ("fixture_triton", "mul", "0") and int(passed) > 50, lines
    assert lines[-1] == "every implemented op passed against PyTorch", lines


@needs_triton
def test_threads_calling_listing_and_loading_at_once_do_not_deadlock():
    done = run_python(PROGRAMS / "triton_kind_threads.py", FIXTURE, env=INTERPRET, timeout=240)
    assert _ok(done).endswith("ok\n")


def test_the_autoload_leaves_it_out_and_imports_nothing_of_it():
    # (Loading the other plugins may import triton itself: torch's own ops do.)
    program = ("import sys, backplane\nbackplane._autoload()\n"
               "assert 'backplane_fixture_triton' not in sys.modules, 'its package was imported'\n"
               "status = {b.name: b.status for b in backplane.backends()}\n"
               "print(status['cpu'], status['fixture_triton'])\n")
    env = {"TRITON_INTERPRET": "1", "BACKPLANE_PLUGIN_PATH": str(FIXTURE)}
    done = run_python(program, env=env, unset=("BACKPLANE_BACKENDS",), flags=("-W", "ignore"))
    # Listed afterwards, outside the autoload, it is checked as any listing checks it: not loaded.
    assert _ok(done).split() == ["loaded", "available" if HAVE_TRITON else "unavailable"], done.stdout
