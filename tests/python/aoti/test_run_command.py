"""`backplane run` on hostile or unusual files (issue 15): each gives a clear error or a
correct result. The reference-file checks come before the package loads, so most cases
use a crafted archive and cost no compile; the others share one compiled package."""
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest
import torch

from conftest import Plain, run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))


def run(package, io, backends="cpu"):
    result = subprocess.run([str(BACKPLANE), "run", str(package), "--backends", backends, "--input", str(io),
                             "--repeat", "1"], capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def reference(batches=(2, 16), atol=0.0, rtol=0.0, device="cpu", layout=lambda x: x):
    cases = []
    for b in batches:
        x, y = torch.randn(b, 3, 4, 5), torch.randn(b, 5)
        cases.append({"batch": b, "inputs": [layout(x), y], "expected": [Plain()(x, y).to(device)]})
    return {"atol": atol, "rtol": rtol, "cases": cases}


@pytest.fixture
def archive(tmp_path):
    """A zip archive shaped like a .pt2; enough for what is checked before the package loads."""
    path = tmp_path / "m.pt2"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("m/archive_format", "pt2")
        z.writestr("m/.data/version", "1\n")
    return path


def test_no_cases_is_an_error(archive, tmp_path):
    torch.save({"atol": 0.0, "rtol": 0.0, "cases": []}, tmp_path / "io.pt")
    code, out = run(archive, tmp_path / "io.pt")
    assert code == 1 and "io.pt: holds no cases: nothing to run the package on or compare with" in out, out


def test_a_tolerance_of_another_type_names_the_key_and_type(archive, tmp_path):
    torch.save({"atol": "0.1", "rtol": 0.0, "cases": []}, tmp_path / "io.pt")
    code, out = run(archive, tmp_path / "io.pt")
    assert code == 1 and "io.pt: 'atol' must be a number, found String" in out, out
    assert "INTERNAL ASSERT" not in out


def test_an_int_tolerance_is_a_number(plain_package, tmp_path):
    torch.save(reference(atol=0, rtol=0), tmp_path / "io.pt")
    code, out = run(plain_package[0], tmp_path / "io.pt")
    assert code == 0 and out.count("matches bit for bit") == 2, out


def test_the_documented_batch_range_runs(plain_package, tmp_path):
    """Batch 2..1024 compiled: 16 and 1024 run under torch's own input check too."""
    torch.save(reference(batches=(2, 16, 1024)), tmp_path / "io.pt")
    code, out = run(plain_package[0], tmp_path / "io.pt")
    assert code == 0 and out.count("matches bit for bit") == 3, out


def test_inputs_in_other_layouts_are_converted(plain_package, tmp_path):
    for name, layout in [("channels_last", lambda x: x.contiguous(memory_format=torch.channels_last)),
                         ("transposed", lambda x: x.transpose(0, -1).contiguous().transpose(0, -1))]:
        torch.save(reference(layout=layout), tmp_path / "io.pt")
        code, out = run(plain_package[0], tmp_path / "io.pt")
        assert code == 0 and out.count("matches bit for bit") == 2, (name, out)
        assert "input 0 (x): copied from strides" in out, (name, out)


def test_a_wrong_dtype_is_refused_naming_both_layouts(plain_package, tmp_path):
    io = reference()
    io["cases"][1]["inputs"][0] = io["cases"][1]["inputs"][0].double()
    torch.save(io, tmp_path / "io.pt")
    code, out = run(plain_package[0], tmp_path / "io.pt")
    assert code == 1, out
    assert ("case 1 (batch 16): input 0 (x): dtype float64 is not float32; the package was compiled for float32 cpu "
            "sizes (2..1024, 3, 4, 5) dense in dimension order [0, 1, 2, 3], found float64 cpu sizes [16, 3, 4, 5]") in out


ON_NPU = Path(__file__).with_name("programs") / "expected_on_npu.py"


def test_a_reference_saved_on_another_device_is_compared_on_the_cpu(plain_package, tmp_path):
    """The expected outputs are saved on npu (Backplane's emulated accelerator; a CPU
    machine has no CUDA): `run` must move them, not compare across devices. The file is
    written in a child process: a registered PrivateUse1 device must not leak into the
    CUDA tests (scripts/test.sh)."""
    torch.save(reference(), tmp_path / "io.pt")
    made = run_python(ON_NPU, tmp_path / "io.pt")
    assert made.returncode == 0 and made.stdout.strip() == "npu:0", made.stdout + made.stderr[-2000:]
    code, out = run(plain_package[0], tmp_path / "io.pt", backends="cpu,npu")
    assert code == 0 and out.count("matches bit for bit") == 2, out


def test_an_entry_outside_the_extraction_folder_is_refused_before_extracting(plain_package, tmp_path):
    package = tmp_path / "evil.pt2"
    shutil.copy(plain_package[0], package)
    marker = f"escaped-{os.getpid()}.txt"
    with zipfile.ZipFile(package, "a") as z:  # the loader extracts under a folder in the temp dir
        for depth in range(1, 4):
            z.writestr("plain/" + "../" * depth + marker, "written outside")
    torch.save(reference(), tmp_path / "io.pt")
    code, out = run(package, tmp_path / "io.pt")
    assert code == 1 and f"its entry '../{marker}' would be written outside the extraction folder" in out, out
    for root in (Path(tempfile.gettempdir()), tmp_path, Path.cwd(), Path("/")):
        assert not (root / marker).exists()


def test_a_malicious_pickle_runs_nothing(archive, tmp_path):
    """The reference file is read by TorchScript's unpickler, which builds no other class:
    a pickle whose __reduce__ would create a file is refused and creates nothing."""
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    torch.save({"atol": 0.0, "rtol": 0.0, "cases": [Evil()]}, tmp_path / "io.pt")
    code, out = run(archive, tmp_path / "io.pt")
    assert code == 1 and not marker.exists(), out
