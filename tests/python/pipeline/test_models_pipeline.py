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

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from models import pipeline  # noqa: E402
from models.spec import assert_matches  # noqa: E402
from conftest import run_python  # noqa: E402

BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))


def refuse_unpickling(*args, **kwargs):
    raise AssertionError("the pipeline unpickled a file from its output folder: a planted one would run code")


@pytest.fixture(params=["identity", "decoder_block"])
def packaged(request, tmp_path_factory):
    """Exports and AOTI-packages the model once per test run, whichever xdist worker asks
    first (conftest.made_once_per_run; the package is verified as it is made); the others
    reuse its output folder. `aoti` and `load` must not unpickle what lies in the output
    folder (ep.pt2 could be planted): torch.export.load, and torch.load other than
    weights_only, fail here."""
    from conftest import made_once_per_run

    with made_once_per_run(tmp_path_factory, f"pipeline-{request.param}") as (folder, made):
        run = pipeline.Run(request.param, "cpu", "float32", folder)
        if made:
            return run
        pipeline.export(run)
        weights_only_load = torch.load

        def checked_load(*args, weights_only=None, **kwargs):
            if weights_only is not True:
                refuse_unpickling()
            return weights_only_load(*args, weights_only=True, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(torch.export, "load", refuse_unpickling)
            patch.setattr(torch, "load", checked_load)
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
    from backplane.aoti.libstdcxx import LIBSTDCXX, package_libraries

    libraries = package_libraries(packaged.artifact("pt2"))
    assert libraries and all(LIBSTDCXX in needed for needed in libraries.values())


def test_package_runs_from_cpp(packaged):
    result = subprocess.run([str(BACKPLANE), "run", str(packaged.artifact("pt2")), "--backends", "cpu", "--input",
                             str(packaged.artifact("io.pt")), "--repeat", "2"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    exact = "bit for bit" if packaged.model == "identity" else "within tolerance"
    assert result.stdout.count(f"matches {exact}") == len(packaged.spec.check_batches), result.stdout


def test_the_documented_batch_range_runs(packaged, tmp_path):
    """Exported for batch 2..1024: the package runs the ends and a size past the traced
    ones, in Python and from C++, under torch's runtime input checks."""
    model = packaged.build()
    cases = []
    with torch.no_grad():
        for batch in (2, 16, 1024):
            inputs = packaged.inputs(batch)
            cases.append({"batch": batch, "inputs": list(inputs), "expected": [packaged.spec.reference(model, *inputs)]})
    atol, rtol = packaged.tolerance
    torch.save({"atol": float(atol), "rtol": float(rtol), "cases": cases}, tmp_path / "io.pt")
    result = subprocess.run([str(BACKPLANE), "run", str(packaged.artifact("pt2")), "--backends", "cpu", "--input",
                             str(tmp_path / "io.pt"), "--repeat", "1"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    import backplane

    compiled = backplane.load_package(packaged.artifact("pt2"))
    for case in cases:
        assert_matches(compiled(*case["inputs"]), case["expected"][0], packaged.tolerance, f"batch {case['batch']}")


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


def test_a_malicious_reference_file_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    torch.save({"atol": 0.0, "rtol": 0.0, "cases": [Evil()]}, tmp_path / "io.pt")
    with pytest.raises(Exception, match="Weights only load failed"):
        list(pipeline.load_cases(tmp_path / "io.pt", "cpu"))
    assert not marker.exists()


def test_assert_matches_reports_the_difference():
    with pytest.raises(AssertionError, match="expected bit-for-bit equality, found max abs difference 0.5"):
        assert_matches(torch.zeros(3), torch.tensor([0.0, 0.5, 0.0]), (0.0, 0.0), "case")


@pytest.mark.parametrize("tolerance", [(0.0, 0.0), (1e-6, 1e-5)])
def test_assert_matches_takes_nan_where_the_reference_has_nan(tolerance):
    nan = float("nan")
    assert_matches(torch.tensor([1.0, nan]), torch.tensor([1.0, nan]), tolerance, "case")
    with pytest.raises(AssertionError, match="NaN at 1 positions where the reference holds a number, a number at 0"):
        assert_matches(torch.tensor([nan, 1.0]), torch.tensor([1.0, 1.0]), tolerance, "case")


FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"


def test_package_records_the_plugin_serving_each_op(packaged):
    from backplane.aoti.plugins import read_plugins

    rows = read_plugins(packaged.artifact("pt2"))
    ops = {op for op, _, _ in rows}
    assert rows and all(key == "CPU" and plugin == "cpu" for _, key, plugin in rows), rows
    assert ops <= {op.name for op in __import__("backplane").ops()}


def test_a_package_records_only_the_plugins_of_its_own_devices(tmp_path):
    """With the cuda plugin loaded in the exporting process (as under pytest-xdist, where
    a worker ran the CUDA tests first), a CPU package records its ops' CPU plugins only:
    the GPU run recorded ('add', 'CUDA', 'cuda') rows in CPU packages before the fix."""
    import zipfile

    import backplane
    from backplane.aoti.plugins import backplane_ops, dispatch_keys, read_plugins, record_plugins

    try:
        backplane.load("cuda")
    except Exception as e:  # noqa: BLE001  (not built on this machine)
        pytest.skip(f"the cuda plugin does not load here: {e}")

    class AddTwice(torch.nn.Module):
        def forward(self, a, b):
            return torch.ops.backplane.add(a, b, alpha=2.0)

    ep = torch.export.export(AddTwice(), (torch.randn(4), torch.randn(4)))
    assert dispatch_keys(ep) == {"CPU"}
    package = tmp_path / "m.pt2"
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("m/archive_format", "pt2")
    assert ("add", "CUDA", "cuda") in {(s.op, s.dispatch_key, s.serving) for s in backplane.serving()}
    record_plugins(package, backplane_ops(ep), dispatch_keys(ep))
    assert read_plugins(package) == [("add", "CPU", "cpu")]


def test_run_refuses_a_package_made_with_another_plugin_unless_told(packaged):
    """identity's package calls identity_conv, served by `cpu` when it was made; here the
    fixture plugin cpu_alt (identity_conv = -x) is preferred for it."""
    if packaged.model != "identity":
        pytest.skip("the identity model is the one calling identity_conv")
    pkg, io = packaged.artifact("pt2"), packaged.artifact("io.pt")
    args = [str(BACKPLANE), "run", str(pkg), "--input", str(io), "--backends", "cpu,cpu_alt",
            "--plugin-dir", str(FIXTURES), "--prefer", "identity_conv:cpu_alt", "--repeat", "1"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "backplane::identity_conv on CPU was served by plugin 'cpu' when the package was made; here 'cpu_alt'" in r.stderr
    assert "--allow-plugin-change" in r.stderr
    # Allowed, it runs on cpu_alt's kernel and says so. (The model applies identity_conv
    # twice, once through its IdentityConv object, so -(-x) still matches the reference.)
    r = subprocess.run(args + ["--allow-plugin-change"], capture_output=True, text=True, timeout=300)
    assert "served by 'cpu_alt' (packaged with 'cpu')" in r.stdout, r.stdout + r.stderr
    # With the packaged plugin preferred it runs and matches.
    packaged_plugin = [a if a != "identity_conv:cpu_alt" else "identity_conv:cpu" for a in args]
    r = subprocess.run(packaged_plugin, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "(as packaged)" in r.stdout, r.stdout + r.stderr


def test_load_package_refuses_another_plugin_unless_told(packaged):
    if packaged.model != "identity":
        pytest.skip("the identity model is the one calling identity_conv")
    code = f"""
import torch, backplane, pytest
from backplane.aoti.plugins import PluginMismatch
backplane.load("cpu"); backplane.load("cpu_alt", path={str(FIXTURES)!r})
with backplane.prefer("identity_conv", "cpu_alt"):
    with pytest.raises(PluginMismatch, match="was served by plugin 'cpu' when the package was made"):
        backplane.load_package({str(packaged.artifact("pt2"))!r})
    run = backplane.load_package({str(packaged.artifact("pt2"))!r}, allow_plugin_change=True)
    assert any("packaged with 'cpu'" in n for n in run.plugins), run.plugins
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr[-3000:]
