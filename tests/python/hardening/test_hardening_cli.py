"""Small hostile or unusual inputs to the CLI and the package readers (issue 32, item 15),
each a clear error or a correct result instead of a backtrace, a silent default, or a
leftover folder. Packages are derived by hand from the one compiled `plain_package`."""
import os
import subprocess
import warnings
import zipfile
from pathlib import Path

import pytest
import torch

import backplane
from backplane.aoti import layouts
from backplane.aoti.archive import check_entries
from backplane.aoti.layouts import read_layouts
from conftest import Plain

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
RECORD = "plain/" + layouts.ENTRY
NOT_UTF8 = b"backplane-inputs 1\ninput 0 x\xff float32 cpu sizes=2..1024,3,4,5 order=0,1,2,3\ninput 1 y other\n"


def cli(*args, **env):
    return subprocess.run([str(BACKPLANE), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def run(package, io, **env):
    r = cli("run", package, "--backends", "cpu", "--input", io, "--repeat", "1", **env)
    return r.returncode, r.stdout + r.stderr


def derived(source, path, replace=None, extra=()):
    """A copy of the package `source`: entries named in `replace` get its bytes (a callable
    of the old bytes, or the new bytes), and the (name, bytes) of `extra` are appended."""
    replace = replace or {}
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(path, "w") as dst, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate names these tests want
        for item in src.infolist():
            data = src.read(item)
            new = replace.get(item.filename, data)
            dst.writestr(item, new(data) if callable(new) else new)
        for name, data in extra:
            dst.writestr(name, data)
    return path


def unloadable(source, path):
    """The package with its model library needing a library that does not exist: it passes
    every check before the load, is extracted, and then fails to load (dlopen)."""
    def rename_needed(library: bytes) -> bytes:
        assert b"libgcc_s.so.1\0" in library  # what g++'s shared objects need
        return library.replace(b"libgcc_s.so.1\0", b"libgcc_x.so.1\0")

    with zipfile.ZipFile(source) as z:
        library = next(n for n in z.namelist() if n.endswith(".so"))
    return derived(source, path, {library: rename_needed})


def reference(path, batches=(2, 16), atol=0.0, rtol=0.0, nan_at=(), expected=None):
    """A reference file for Plain; `nan_at` puts NaN into x (and so the output) at those
    indices; `expected(out)` edits the saved outputs."""
    cases = []
    for b in batches:
        x, y = torch.randn(b, 3, 4, 5), torch.randn(b, 5)
        for index in nan_at:
            x[index] = float("nan")
        out = Plain()(x, y)
        cases.append({"batch": b, "inputs": [x, y], "expected": [expected(out) if expected else out]})
    torch.save({"atol": atol, "rtol": rtol, "cases": cases}, path)
    return path


# new-backend


@pytest.mark.parametrize("name,key,why", [
    ("xpu", "PrivateUse1", "the name of a PyTorch device type"),
    ("meta", "CPU", "the name of a PyTorch device type"),
    ("privateuseone", "PrivateUse1", "the name of a PyTorch device type"),
    ("cpu", "CPU", "the name of an in-tree Backplane backend"),
    ("cuda", "CUDA", "the name of an in-tree Backplane backend"),
    ("npu", "CPU", "the name of an in-tree Backplane backend"),
])
def test_new_backend_refuses_device_and_in_tree_names(tmp_path, name, key, why):
    r = cli("new-backend", name, "--dispatch-key", key, "--dir", tmp_path / "out")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"backplane new-backend: '{name}' is {why}" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_new_backend_takes_a_name_that_only_contains_a_device_name(tmp_path):
    r = cli("new-backend", "xpu_acme", "--dispatch-key", "CPU", "--dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "CMakeLists.txt").exists()


# run --repeat


@pytest.mark.parametrize("value", ["abc", "-1", "0", "1.5", "", "99999999999999999999", "100001"])
def test_run_repeat_takes_a_positive_integer_within_its_bound(value):
    r = cli("run", "m.pt2", "--input", "m.io.pt", "--repeat", value)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"backplane run: --repeat '{value}': expected a positive integer from 1 to 100000" in r.stderr


# duplicate entries


@pytest.fixture
def duplicated(plain_package, tmp_path):
    """The package with its layout record twice, the second saying other sizes: which of
    the two a reader takes is up to it (zipfile the last; miniz, searching its sorted
    index, either; torch's extraction writes both, the last one staying)."""
    with zipfile.ZipFile(plain_package[0]) as z:
        other = z.read(RECORD).replace(b"sizes=2..1024,3,4,5", b"sizes=2..1024,3,4,6")
    return derived(plain_package[0], tmp_path / "dup.pt2", extra=[(RECORD, other)])


def test_duplicate_entries_are_refused_by_run(duplicated, tmp_path):
    code, out = run(duplicated, reference(tmp_path / "io.pt"))
    assert code == 1 and "refusing the package: it holds 2 entries named 'extra/backplane_inputs.txt'" in out, out


def test_duplicate_entries_are_refused_by_load_package(duplicated):
    message = r"refusing the package: it holds 2 entries named 'plain/extra/backplane_inputs\.txt'"
    with pytest.raises(ValueError, match=message):
        check_entries(duplicated)
    with pytest.raises(ValueError, match=message):
        backplane.load_package(duplicated)


# a failed load


@pytest.fixture(scope="module")
def extracts_under_tmpdir(plain_package, tmp_path_factory):
    """Skips, naming the torch, where torch's package loader extracts outside TMPDIR
    (older torch: a fixed /tmp/XXXXXX): there the extraction cannot be redirected, so a
    failed load's files are not cleaned, and these tests would pass without checking."""
    import gc

    probe = tmp_path_factory.mktemp("extraction-probe")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(probe)
    try:
        from torch._inductor import aoti_load_package

        loaded = aoti_load_package(str(plain_package[0]))
        found = any(probe.iterdir())
        del loaded
        gc.collect()
    finally:
        if before is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = before
    if not found:
        pytest.skip(f"torch {torch.__version__} extracts packages outside TMPDIR: a failed load's files cannot be "
                    "redirected, and are not cleaned")


def test_a_failed_run_leaves_no_extracted_files(plain_package, tmp_path, extracts_under_tmpdir):
    temp = tmp_path / "temp"
    temp.mkdir()
    code, out = run(unloadable(plain_package[0], tmp_path / "bad.pt2"), reference(tmp_path / "io.pt"),
                    TMPDIR=str(temp))
    assert code == 1 and "libgcc_x.so.1" in out, out
    assert list(temp.iterdir()) == []


def test_a_failed_load_package_leaves_no_extracted_files(plain_package, tmp_path, monkeypatch, extracts_under_tmpdir):
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # Python's temporary folder ...
    monkeypatch.setenv("TMPDIR", str(temp))  # ... and torch's loader's
    with pytest.raises(RuntimeError, match="libgcc_x.so.1"):
        backplane.load_package(unloadable(plain_package[0], tmp_path / "bad.pt2"))
    assert list(temp.iterdir()) == []
    assert os.environ["TMPDIR"] == str(temp)


def test_a_loaded_package_keeps_its_files_until_dropped(plain_package, tmp_path, monkeypatch, extracts_under_tmpdir):
    import gc
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("TMPDIR", raising=False)
    run_it = backplane.load_package(plain_package[0])
    assert "TMPDIR" not in os.environ
    assert list(tmp_path.glob("backplane-load-*/aotinductor_*"))
    x, y = torch.randn(4, 3, 4, 5), torch.randn(4, 5)
    assert torch.equal(run_it(x, y), Plain()(x, y))
    del run_it
    gc.collect()
    assert list(tmp_path.iterdir()) == []


# NaN


@pytest.mark.parametrize("atol", [0.0, 1e-6])
def test_nan_where_the_reference_has_nan_matches(plain_package, tmp_path, atol):
    code, out = run(plain_package[0], reference(tmp_path / "io.pt", atol=atol, rtol=atol, nan_at=[(0, 1, 2, 3)]))
    assert code == 0 and out.count("matches bit for bit" if atol == 0 else "matches within tolerance") == 2, out


def test_nan_where_the_reference_has_a_number_is_a_mismatch(plain_package, tmp_path):
    def drop_nan(out):
        return out.nan_to_num(0.0)

    code, out = run(plain_package[0], reference(tmp_path / "io.pt", nan_at=[(0, 1, 2, 3), (1, 0, 0, 0)],
                                                expected=drop_nan))
    assert code == 1, out
    assert "MISMATCH: NaN at 2 positions where the reference holds a number" in out, out


# layout records that are not UTF-8


@pytest.fixture
def not_utf8(plain_package, tmp_path):
    return derived(plain_package[0], tmp_path / "bytes.pt2", {RECORD: NOT_UTF8})


def test_a_record_that_is_not_utf8_is_named_by_run(not_utf8, tmp_path):
    code, out = run(not_utf8, reference(tmp_path / "io.pt"))
    assert code == 1, out
    assert "bytes.pt2:extra/backplane_inputs.txt: expected UTF-8 text, found byte 0xff at offset 28 (line 2)" in out


def test_a_record_that_is_not_utf8_is_named_by_load_package(not_utf8):
    with pytest.raises(ValueError, match=r"bytes\.pt2:plain/extra/backplane_inputs\.txt: expected UTF-8 text, "
                                         r"found byte 0xff at offset 28 \(line 2\)"):
        read_layouts(not_utf8)
    with pytest.raises(ValueError, match=r"p\.pt2: expected UTF-8 text, found byte 0xff at offset 28 \(line 2\)"):
        layouts.parse_layouts(NOT_UTF8, "p.pt2")
