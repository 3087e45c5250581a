"""`backplane new-backend NAME --dispatch-key PrivateUse1`: the kernel stubs it writes point
only at files the new project has, since a user of an installed Backplane or of the wheel
has no backends/npu/kernels/. Building the scaffold and running its tests (the npu's
device tests, renamed) is the SDK journey's step 3b (scripts/sdk_journey.sh), which also
builds and tests the device made `--without` all its optional parts; here, what --without
writes and refuses."""
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))


def test_kernel_stubs_point_at_files_the_project_has(tmp_path):
    root = tmp_path / "acme"
    done = subprocess.run([str(BACKPLANE), "new-backend", "acme", "--dispatch-key", "PrivateUse1", "--dir", str(root)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    stubs = sorted((root / "kernels").glob("*.cpp"))
    assert stubs
    for stub in stubs:
        text = stub.read_text()
        assert "backends/" not in text, f"{stub.name} points into Backplane's source tree"
        named = re.findall(r"(?<![\w/])(device/\w+\.h|aten/\w+\.cpp)\b", text)
        assert "aten/fill.cpp" in named and "device/launch.h" in named, (stub.name, named)
        missing = [name for name in named if not (stub.parent / name).exists() and not (root / name).exists()]
        assert not missing, f"{stub.name} names files the project lacks: {missing}"


# What `--without PART` leaves out: each part's files, renamed (the [PART] sections of
# backends/npu/new-backend-files.txt), and nothing else.
PART_FILES = {
    "profiler": ("profiler/", "python/backplane_acme/_profiler.py", "tests/test_profiler.py"),
    "compile": ("compile/", "python/backplane_acme/compile/", "tests/test_compile.py", "tests/test_aoti.py"),
    "collectives": ("collectives/", "python/backplane_acme/_collectives.py", "tests/test_collectives.py",
                    "tests/test_distributed.py"),
}


def _scaffold(root, *flags):
    done = subprocess.run([str(BACKPLANE), "new-backend", "acme", "--dispatch-key", "PrivateUse1", *flags, "--dir",
                           str(root)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    return files, done.stdout.replace(str(root), "ROOT")


def _parts_listed(root):
    namespace = {}
    exec((root / "python" / "backplane_acme" / "_parts.py").read_text(), namespace)
    return namespace["PARTS"]


def test_without_leaves_out_exactly_each_part_and_the_next_steps_stay(tmp_path):
    full, full_out = _scaffold(tmp_path / "full")
    assert _parts_listed(tmp_path / "full") == ("profiler", "compile", "collectives")
    assert "this device was made without: none (" in (tmp_path / "full" / "README.md").read_text()
    for part, prefixes in PART_FILES.items():
        lean, lean_out = _scaffold(tmp_path / part, "--without", part)
        expected_gone = {f for f in full if f.startswith(prefixes)}
        assert all(any(f.startswith(p) for f in full) for p in prefixes), part  # each names files the device has
        assert full - lean == expected_gone, part
        assert lean <= full
        assert _parts_listed(tmp_path / part) == tuple(p for p in PART_FILES if p != part)
        first, _, rest = lean_out.partition("\n")
        assert first.endswith(f"kernel stubs, none registered yet; without {part})"), first
        assert rest == full_out.partition("\n")[2]  # the "next:" lines, unchanged


def test_without_takes_a_comma_list_and_repeats(tmp_path):
    full, _ = _scaffold(tmp_path / "full")
    lean, out = _scaffold(tmp_path / "lean", "--without", "compile,profiler", "--without", "collectives")
    assert full - lean == {f for f in full if f.startswith(sum(PART_FILES.values(), ()))}
    assert _parts_listed(tmp_path / "lean") == ()
    assert "; without profiler, compile, collectives)" in out.partition("\n")[0]
    readme = (tmp_path / "lean" / "README.md").read_text()
    assert "Of its optional parts (profiler, compile, collectives), this device was made without: profiler, compile, " \
           "collectives (" in readme
    assert "_collectives.py" not in readme  # its torch.distributed note goes with the part


@pytest.mark.parametrize("flags, message", [
    (["--dispatch-key", "PrivateUse1", "--without", "compile,graphs"],
     "backplane new-backend: --without 'graphs': expected a part of the PrivateUse1 device (profiler, compile, "
     "collectives)\n"),
    (["--dispatch-key", "CPU", "--without", "compile"],
     "backplane new-backend: --without leaves optional parts out of a PrivateUse1 device (its template list's [PART] "
     "sections); --dispatch-key CPU writes no device, so there is nothing to leave out\n"),
    (["--dispatch-key", "CUDA", "--without", "profiler"],
     "backplane new-backend: --without leaves optional parts out of a PrivateUse1 device (its template list's [PART] "
     "sections); --dispatch-key CUDA writes no device, so there is nothing to leave out\n"),
    (["--triton", "--without", "compile"],
     "backplane new-backend: --triton writes a Python package of Triton kernels, which serve CUDA (and the CPU under "
     "TRITON_INTERPRET=1) whatever the torch ABI; it takes no --without\n"),
])
def test_without_refusals_name_what_was_given_and_expected(tmp_path, flags, message):
    root = tmp_path / "acme"
    done = subprocess.run([str(BACKPLANE), "new-backend", "acme", *flags, "--dir", str(root)], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stderr) == (2, message)
    assert not root.exists()  # refused before anything is written
