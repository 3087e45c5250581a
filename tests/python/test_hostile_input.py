"""Names and files from outside the process: a backend name that is not a plain
identifier (a NUL once truncated it), and a plugin directory whose manifests hold
bytes that are not UTF-8 (they once broke backplane.backends() for every backend)."""
import pytest

import backplane


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
