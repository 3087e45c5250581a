"""Names and files from outside the process: a backend name that is not a plain
identifier (a NUL once truncated it), and a plugin directory whose manifests hold
bytes that are not UTF-8 (they once broke backplane.backends() for every backend)."""
from pathlib import Path

import pytest

import backplane
from conftest import child_env, run_python


@pytest.mark.parametrize("name", ["cpu\x00../x", "cpu\x00", "c pu", "cpü", "a-b", "1cpu"])
def test_names_that_are_not_plain_identifiers_are_refused(name):
    with pytest.raises(ValueError) as err:
        backplane.load(name)
    assert f"invalid backend name {name!r}: expected a plain identifier ([A-Za-z_][A-Za-z0-9_]*)" in str(err.value)
    assert isinstance(err.value, backplane.BackendError)  # what load() raised for paths before


def test_a_directory_holding_a_nul_is_refused(tmp_path):
    with pytest.raises(ValueError, match="invalid plugin directory .*: it holds a NUL character"):
        backplane.load("cpu", path=f"{tmp_path}\x00/elsewhere")


def _manifest(**fields):
    """The cpu plugin's manifest with some values replaced by raw bytes."""
    out = []
    for line in (backplane.lib_dir() / "libbackplane_cpu.manifest.yaml").read_bytes().splitlines():
        key = line.split(b":", 1)[0].decode()
        out.append(key.encode() + b": " + fields[key] if key in fields else line)
    return b"\n".join(out) + b"\n"


def test_manifest_bytes_that_are_not_utf8_never_break_backends(tmp_path, monkeypatch):
    # One plugin with a damaged version string (compatible otherwise: listed as
    # available), one whose name does not match its file (rejected, the reason quotes it).
    (tmp_path / "libbackplane_badver.so").write_bytes(b"")
    (tmp_path / "libbackplane_badver.manifest.yaml").write_bytes(_manifest(name=b"badver", version=b'"1.\xff\xfe"'))
    (tmp_path / "libbackplane_badname.so").write_bytes(b"")
    (tmp_path / "libbackplane_badname.manifest.yaml").write_bytes(_manifest(name=b"bad\xc3"))
    monkeypatch.setenv("BACKPLANE_PLUGIN_PATH", str(tmp_path))
    backplane.load("cpu")
    found = {b.name: b for b in backplane.backends()}
    assert found["cpu"].status == "loaded"
    assert found["badver"].version == "1.\ufffd\ufffd"
    assert found["badname"].status == "rejected"
    assert "manifest names backend 'bad\ufffd', expected 'badname'" in found["badname"].reason


LYING_PLUGIN = Path(__file__).with_name("programs") / "load_lying_plugin.py"


@pytest.mark.parametrize("lie", ["ops: []", "dispatch_key: CUDA"])
def test_a_manifest_that_lies_about_registrations_is_caught_after_dlopen(tmp_path, lie):
    """fixture_dup registers identity_conv for CPU with a plain m.impl. Copied with a manifest
    that declares no ops, or another key, it passes every check made before dlopen; what the
    library then registered is compared with the manifest, and the load fails naming both
    (its kernel stays registered in that process: the reason says to restart)."""
    import shutil
    import subprocess

    fixtures = backplane.lib_dir().parent / "tests" / "fixtures"
    shutil.copy(fixtures / "libbackplane_fixture_dup.so", tmp_path / "libbackplane_liar.so")
    manifest = (fixtures / "libbackplane_fixture_dup.manifest.yaml").read_text().replace("name: fixture_dup", "name: liar")
    key, value = lie.split(": ")
    manifest = "\n".join(f"{key}: {value}" if line.startswith(key + ":") else line for line in manifest.splitlines())
    (tmp_path / "libbackplane_liar.manifest.yaml").write_text(manifest.replace("registration: direct", "registration: core"))
    r = run_python(LYING_PLUGIN, tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "backend 'liar' failed" in r.stdout, r.stdout
    assert "registered a CPU kernel for backplane::identity_conv (registered at " in r.stdout, r.stdout
    assert "dup_plugin.cpp" in r.stdout and "restart it without this plugin" in r.stdout, r.stdout
    # `backplane list` probes it in a child first: listed as failed, never opened in its own process.
    listed = subprocess.run([str(backplane.lib_dir().parent / "bin" / "backplane"), "list", "--json", "--plugin-path",
                             str(tmp_path)], capture_output=True, text=True, env=child_env(), timeout=120)
    import json

    found = {b["name"]: b for b in json.loads(listed.stdout)["backends"]}
    assert found["liar"]["status"] == "failed", found["liar"]
    assert "registered a CPU kernel for backplane::identity_conv" in found["liar"]["reason"], found["liar"]
    assert "in a child process probe" in found["liar"]["reason"] and found["cpu"]["status"] == "loaded"
