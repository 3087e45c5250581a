"""Selection files (core/include/backplane/selection_file.h): which plugin serves an op by
the call's size. Two CPU plugins: cpu and the fixture cpu_alt, whose identity_conv returns
-x, so each call says which plugin served it. Routing runs in child processes, so this
session's plugins and choices stay as they are."""
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

import backplane
from conftest import child_env, run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"
PROGRAMS = Path(__file__).with_name("programs")

SPLIT = """\
backplane_selection: 1
made_by: {command: "written by hand"}
ops:
  - op: identity_conv
    dispatch_key: CPU
    buckets:
      - {up_to: 100, plugin: cpu_alt, measured: [{preset: small, median_us: {cpu: 2.0, cpu_alt: 1.0}}]}
      - {plugin: cpu}
"""


def _file(tmp_path, text, name="selection.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _child(program, *args, **env):
    """Runs programs/`program` (it starts with programs/size_split.py) given FIXTURES and `args`."""
    r = run_python(PROGRAMS / program, FIXTURES, *args, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_calls_are_served_by_size_and_serving_says_which_bucket(tmp_path):
    path = _file(tmp_path, SPLIT)
    _child("size_split_served_by_size.py", path)


@pytest.mark.slow
def test_compiled_code_follows_the_size_rule(tmp_path):
    path = _file(tmp_path, SPLIT)
    _child("size_split_compiled.py", path, TORCHINDUCTOR_VEC_ISA_OK="1")


def test_environment_variable_and_a_plugin_missing_here(tmp_path):
    path = _file(tmp_path, SPLIT.replace("plugin: cpu}", "plugin: gone}"))
    out = _child("size_split_from_environment.py", BACKPLANE_SELECTION=str(path))
    assert "bucket 2 (more than 100 elements): cpu ('gone' does not serve it here; loaded first)" in out


def test_a_bad_environment_file_is_a_warning_not_a_crash(tmp_path):
    path = _file(tmp_path, "backplane_selection: 2\nops: []\n")
    r = run_python("import backplane; print(repr(backplane.selection_file()))", env={"BACKPLANE_SELECTION": str(path)})
    assert r.returncode == 0 and r.stdout.strip() == "''", r.stderr[-2000:]
    assert f"ignoring BACKPLANE_SELECTION: {path}:1:22: backplane_selection: expected version 1, found '2'" in r.stderr


@pytest.mark.parametrize("text, where, message", [
    ("ops: []\n", "1:1", "not a selection file: expected 'backplane_selection: 1' at the top"),
    ("backplane_selection: 1\nops: []\nextra: 1\n", "3:1", "unknown selection file key 'extra'"),
    ("backplane_selection: 1\n", "1:1", "selection file: missing 'ops'"),
    ("backplane_selection: 1\nops: {}\n", "2:6", "ops: expected a list, found a mapping"),
    ("backplane_selection: 1\nops:\n  - {op: nosuch, dispatch_key: CPU, buckets: [{plugin: cpu}]}\n", "3:10",
     "no op 'nosuch' in the registry or a loaded plugin's fragment"),
    ("backplane_selection: 1\nops:\n  - {op: 'acme::fused gelu', dispatch_key: CPU, buckets: [{plugin: cpu}]}\n",
     "3:10", "'acme::fused gelu' is not an op name (a plugin's own is ns::name)"),
    ("backplane_selection: 1\nops:\n  - {op: add, dispatch_key: GPU, buckets: [{plugin: cpu}]}\n", "3:29",
     "dispatch_key: expected a dispatch key such as CPU, CUDA or PrivateUse1, found 'GPU'"),
    ("backplane_selection: 1\nops:\n  - {op: add, dispatch_key: CPU, buckets: []}\n", "3:43",
     "op 'add': buckets: expected a list of at least one {up_to, plugin}, found an empty list"),
    ("backplane_selection: 1\nops:\n  - {op: add, dispatch_key: CPU, buckets: [{plugin: a}, {plugin: b}]}\n",
     "3:44", "op 'add', bucket 1: missing 'up_to'"),
    ("backplane_selection: 1\nops:\n  - {op: add, dispatch_key: CPU, buckets: [{up_to: 5, plugin: a}, "
     "{up_to: 9, plugin: b}]}\n", "3:75", "op 'add', bucket 2 is the last bucket, so it takes every larger call and "
     "must have no 'up_to'; found up_to '9': remove it, or add a bucket after this one for the larger calls"),
    ("backplane_selection: 1\nops:\n  - {op: add, dispatch_key: CPU, buckets: [{up_to: 9, plugin: a}, "
     "{up_to: 9, plugin: b}, {plugin: c}]}\n", "3:75", "op 'add', bucket 2: up_to 9 must exceed the bucket before it (9)"),
    ("backplane_selection: 1\nops:\n  - {op: add, dispatch_key: CPU, buckets: [{up_to: -1, plugin: a}, {plugin: b}]}\n",
     "3:52", "up_to: expected a whole number of elements >= 0, found '-1'"),
    ("backplane_selection: 1\nops:\n  - {op: add, dispatch_key: CPU, buckets: [{plugin: 'a b'}]}\n", "3:53",
     "'a b' is not a plugin name (a plain identifier)"),
    ("backplane_selection: 1\nops:\n  - {op: add, dispatch_key: CPU, buckets: [{plugin: a}]}\n"
     "  - {op: backplane::add, dispatch_key: CPU, buckets: [{plugin: b}]}\n", "4:5",
     "op 'add' on CPU appears twice in the file"),
    ("backplane_selection: 1\nops: [\n", "3:1", "not YAML"),
])
def test_mistakes_are_refused_with_their_place(tmp_path, text, where, message):
    path = _file(tmp_path, text)
    before = backplane.selection_file()
    with pytest.raises(ValueError) as caught:
        backplane.apply_selection(path)
    assert str(caught.value).startswith(f"{os.path.abspath(path)}:{where}: "), str(caught.value)
    assert message in str(caught.value)
    assert backplane.selection_file() == before, "a refused file changes nothing"


def test_an_unreadable_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="cannot read the selection file"):
        backplane.apply_selection(tmp_path / "absent.yaml")


def _cli(*args, **env):
    return subprocess.run([str(BACKPLANE), *args], capture_output=True, text=True, env=child_env(**env), timeout=300)


def test_the_command_applies_a_file_and_refuses_a_bad_one(tmp_path):
    path = _file(tmp_path, SPLIT)
    args = ["ops", "--backends", "cpu,cpu_alt", "--plugin-dir", str(FIXTURES)]
    r = _cli(*args, "--selection", str(path))
    assert r.returncode == 0, r.stderr
    assert any("identity_conv" in line and f"cpu_alt<=100,cpu (selection file {path}, bucket 1" in line
               for line in r.stdout.splitlines()), r.stdout
    data = json.loads(_cli(*args, "--json", "--selection", str(path)).stdout)
    served = next(s for s in data["serving"] if s["op"] == "identity_conv")
    # dtype "": the split of every dtype (a file keyed by dtype tags each bucket with its dtype)
    assert served["buckets"] == [{"up_to": 100, "plugin": "cpu_alt", "dtype": ""},
                                 {"up_to": None, "plugin": "cpu", "dtype": ""}]
    r = _cli(*args, "--selection", str(tmp_path / "absent.yaml"))
    assert r.returncode == 2 and "--selection: " in r.stderr and "cannot read the selection file" in r.stderr
