"""Both models through every pipeline step on CPU: eager, torch.compile, torch.export
(dynamic batch), AOTInductor package loaded from Python and from C++ (`backplane run`,
no Python in that process), and ONNX through onnxruntime. Each step checks against the
model's plain-PyTorch reference itself and raises on a mismatch."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from models import pipeline  # noqa: E402
from models.spec import assert_matches  # noqa: E402

BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))


@pytest.fixture(scope="module", params=["identity", "decoder_block"])
def packaged(request, tmp_path_factory):
    """Exports and AOTI-packages the model once (the package is verified as it is made)."""
    run = pipeline.Run(request.param, "cpu", "float32", tmp_path_factory.mktemp(request.param))
    pipeline.export(run)
    pipeline.aoti(run)
    return run


@pytest.mark.parametrize("model", ["identity", "decoder_block"])
def test_eager_and_compile(model):
    run = pipeline.Run(model)
    pipeline.eager(run)
    pipeline.compile(run)


def test_decoder_block_bfloat16_eager():
    pipeline.eager(pipeline.Run("decoder_block", dtype="bfloat16"))


def test_reference_files_cover_other_batch_sizes(packaged):
    cases = list(pipeline.load_cases(packaged.artifact("io.pt"), "cpu"))
    batches = [b for b, *_ in cases]
    assert packaged.spec.traced_batch in batches and len(set(batches)) >= 3


def test_package_loads_and_runs_in_python(packaged):
    pipeline.load(packaged, probe_first=False)


def test_package_has_a_dynamic_libstdcxx(packaged):
    from models.native_libstdcxx import LIBSTDCXX, package_libraries

    libraries = package_libraries(packaged.artifact("pt2"))
    assert libraries and all(LIBSTDCXX in needed for needed in libraries.values())


def test_package_runs_from_cpp(packaged):
    result = subprocess.run([str(BACKPLANE), "run", str(packaged.artifact("pt2")), "--backends", "cpu", "--input",
                             str(packaged.artifact("io.pt")), "--repeat", "2"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    exact = "bit for bit" if packaged.model == "identity" else "within tolerance"
    assert result.stdout.count(f"matches {exact}") == len(packaged.spec.check_batches), result.stdout


def test_cpp_run_without_the_plugin_names_the_op_and_plugin(packaged):
    # Loading an unrelated backend only: the package's backplane ops have no CPU kernel.
    env = {**os.environ, "BACKPLANE_BACKENDS": ""}
    result = subprocess.run([str(BACKPLANE), "run", str(packaged.artifact("pt2")), "--backends", "nonexistent_backend",
                             "--input", str(packaged.artifact("io.pt"))], capture_output=True, text=True, env=env)
    assert result.returncode == 1
    assert "nonexistent_backend" in result.stderr  # the named plugin cannot be found: said first


def test_cpp_run_with_no_backend_loaded_names_the_missing_op(packaged):
    result = subprocess.run([str(BACKPLANE), "run", str(packaged.artifact("pt2")), "--backends", "none",
                             "--input", str(packaged.artifact("io.pt"))], capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    op = "identity_conv" if packaged.model == "identity" else "add"
    assert f"the package calls backplane::{op} on cpu, but no loaded backend implements it for CPU" in result.stderr
    assert "load the plugin that implements it: cpu (" in result.stderr


def test_onnx_export_checks_and_matches(packaged):
    pytest.importorskip("onnxruntime", reason="onnx, onnxscript and onnxruntime are installed by scripts/setup.sh")
    path = pipeline.onnx(packaged)
    import onnx

    domains = {n.domain for n in onnx.load(str(path)).graph.node}
    assert "backplane" in domains


def test_a_package_that_differs_from_the_reference_fails_loudly(packaged, tmp_path):
    # Break the saved reference: every check downstream must report it, not pass.
    io = torch.load(packaged.artifact("io.pt"), weights_only=True)
    io["cases"][0]["expected"][0] = io["cases"][0]["expected"][0] + 1
    broken = pipeline.Run(packaged.model, "cpu", "float32", tmp_path)
    torch.save(io, broken.artifact("io.pt"))
    os.symlink(packaged.artifact("pt2"), broken.artifact("pt2"))
    with pytest.raises(AssertionError, match="batch 2"):
        pipeline.load(broken, probe_first=False)
    result = subprocess.run([str(BACKPLANE), "run", str(broken.artifact("pt2")), "--backends", "cpu", "--input",
                             str(broken.artifact("io.pt")), "--repeat", "1"], capture_output=True, text=True)
    assert result.returncode == 1 and "MISMATCH" in result.stdout


def test_assert_matches_reports_the_difference():
    with pytest.raises(AssertionError, match="expected bit-for-bit equality, found max abs difference 0.5"):
        assert_matches(torch.zeros(3), torch.tensor([0.0, 0.5, 0.0]), (0.0, 0.0), "case")
