"""Issue 45, items 3 and 16: what a selection file's path may name. Only a regular file of
at most 16 MiB is read, opened without blocking: a FIFO used to block apply_selection and
`import backplane` (BACKPLANE_SELECTION) for good, /dev/zero to eat memory without end, a
directory to read as an empty file. A path with a NUL or given as bytes is refused naming
it. Each case runs in a child process, so a regression fails on the timeout instead of
hanging the session; the core reader is shared with plugin manifests, whose cap is here too."""
import os
import subprocess
from pathlib import Path

import pytest

from conftest import child_env, run_python
from fault_plugins import plugin_copy

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
CAP = 16 << 20  # kMaxTextFileBytes, core/src/plugins/posix_files.h
TOO_LARGE = f"it holds more than 16 MiB ({CAP} bytes); expected a small text file"


def python(code: str, **env) -> subprocess.CompletedProcess:
    return run_python(code, env=env, timeout=120)


def refusal(path) -> str:
    """What apply_selection(path) raised in a child process (or the child's failure)."""
    done = python("import backplane\n"
                  "try:\n"
                  f"    backplane.apply_selection({str(path)!r})\n"
                  "except ValueError as e:\n"
                  "    print(e)\n")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "selection.yaml"
    os.mkfifo(path)
    return path


def test_a_fifo_is_refused_not_waited_on(fifo):
    assert refusal(fifo) == (f"{fifo}: cannot read the selection file: it is a FIFO (named pipe), expected a "
                             "regular file")


def test_a_fifo_in_the_environment_variable_does_not_hang_the_import(fifo):
    done = python("import backplane; print(repr(backplane.selection_file()))", BACKPLANE_SELECTION=str(fifo))
    assert done.returncode == 0 and done.stdout.strip() == "''", done.stderr[-2000:]
    assert (f"ignoring BACKPLANE_SELECTION: {fifo}: cannot read the selection file: it is a FIFO (named pipe), "
            "expected a regular file") in done.stderr


def test_a_device_is_refused_not_read_without_end():
    assert refusal("/dev/zero") == ("/dev/zero: cannot read the selection file: it is a character device, expected a "
                                    "regular file")


def test_a_directory_is_named_as_one(tmp_path):
    assert refusal(tmp_path) == (f"{tmp_path}: cannot read the selection file: it is a directory, expected a "
                                 "regular file")


def test_a_file_larger_than_the_cap_is_refused_unread(tmp_path):
    path = tmp_path / "selection.yaml"
    with open(path, "wb") as f:
        f.truncate(CAP + 1)  # sparse: nothing is written to disk
    assert refusal(path) == f"{path}: cannot read the selection file: {TOO_LARGE}"


def test_a_manifest_larger_than_the_cap_is_refused(tmp_path):
    """The same reader serves plugin manifests (manifest.cpp)."""
    plugin_copy(tmp_path, "exits", "huge")
    manifest = tmp_path / "libbackplane_huge.manifest.yaml"
    with open(manifest, "ab") as f:
        f.truncate(CAP + 1)
    r = subprocess.run([str(BACKPLANE), "list", "--json", "--plugin-path", str(tmp_path)], capture_output=True,
                       text=True, env=child_env(), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f'"reason": "cannot read manifest {manifest}: {TOO_LARGE}"' in r.stdout, r.stdout


def test_a_path_with_a_nul_is_refused_naming_it(tmp_path):
    # The C interface would have read "<dir>/real.yaml" and applied that file instead.
    import backplane

    (tmp_path / "real.yaml").write_text("backplane_selection: 1\nops: []\n")
    path = f"{tmp_path}/real.yaml\x00other"
    before = backplane.selection_file()
    with pytest.raises(ValueError) as caught:
        backplane.apply_selection(path)
    assert str(caught.value) == f"selection file {path!r}: the path holds a NUL character"
    assert backplane.selection_file() == before


@pytest.mark.parametrize("path", [b"/tmp/selection.yaml", 3])
def test_a_path_that_is_not_str_is_a_type_error_naming_it(path):
    import backplane

    with pytest.raises(TypeError) as caught:
        backplane.apply_selection(path)
    assert str(caught.value).startswith(f"selection file {path!r}: expected a path"), caught.value
    assert ("found bytes (os.fsdecode gives the str)" if isinstance(path, bytes) else "found int") in str(caught.value)
