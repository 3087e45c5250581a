"""`backplane new-backend NAME --dispatch-key PrivateUse1`: the kernel stubs it writes point
only at files the new project has, since a user of an installed Backplane or of the wheel
has no backends/npu/kernels/. Building the scaffold and running its tests (the npu's
device tests, renamed) is the SDK journey's step 3b (scripts/sdk_journey.sh)."""
import os
import re
import subprocess
from pathlib import Path

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
