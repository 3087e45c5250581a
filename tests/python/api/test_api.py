"""The Python face: load(), backends(), ops(), errors, and autoload from the environment."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import backplane
from conftest import run_python

PYTHON_DIR = str(Path(__file__).resolve().parents[3] / "python")


def test_load_returns_the_record():
    (cpu,) = backplane.load("cpu")
    assert cpu.status == "loaded"
    assert cpu.dispatch_key == "CPU"
    assert "add" in cpu.ops and set(cpu.ops) <= {op.name for op in backplane.ops()}
    assert cpu.path.endswith("libbackplane_cpu.so")


def test_load_is_idempotent():
    first = backplane.load("cpu")
    assert backplane.load("cpu", "cpu") == first * 2
    assert [b.name for b in backplane.backends()].count("cpu") == 1


def test_unknown_backend_names_the_search():
    with pytest.raises(backplane.BackendError) as err:
        backplane.load("tpu9000")
    msg = str(err.value)
    assert "backend 'tpu9000' not found: looked for libbackplane_tpu9000.so in [" in msg
    assert str(backplane.lib_dir()) in msg
    assert "found plugins: cpu" in msg


@pytest.mark.parametrize("name", ["../cpu", "a/b", "cpu.so", ".."])
def test_paths_are_refused(name):
    with pytest.raises(backplane.BackendError, match="expected a plain identifier"):
        backplane.load(name)


def test_explicit_directory_is_searched_after_the_installed_plugins(tmp_path):
    with pytest.raises(backplane.BackendError) as err:
        backplane.load("nothere", path=str(tmp_path))
    assert f"in [{backplane.lib_dir()}, {tmp_path}" in str(err.value)


def test_ops_is_the_coverage_matrix():
    table = {op.name: op for op in backplane.ops()}
    # The registry file is the only list of ops.
    yaml_text = (Path(__file__).resolve().parents[3] / "registry" / "ops.yaml").read_text()
    assert list(table) == re.findall(r"^  - schema: (\w+)\(", yaml_text, re.M)
    add = table["add"]
    assert add.schema == "add(Tensor a, Tensor b, *, Scalar alpha=1) -> Tensor"
    assert add.dtypes == ("float32", "float64", "float16", "bfloat16")
    assert add.backends["cpu"] == add.dtypes


def test_info():
    info = backplane.info()
    assert info["torch"] == ".".join(torch.__version__.split(".")[:2])
    assert info["plugin_abi"] == 1


def _python(code, **env):
    return run_python(code, env=env, timeout=120)


def test_environment_loads_at_import():
    done = _python(
        "import backplane; print([(b.name, b.status) for b in backplane.backends()])", BACKPLANE_BACKENDS="cpu"
    )
    assert done.returncode == 0, done.stderr
    assert "('cpu', 'loaded')" in done.stdout


def test_environment_naming_a_missing_backend_fails_at_import():
    done = _python("import backplane", BACKPLANE_BACKENDS="cpu,missing")
    assert done.returncode != 0
    assert "backend 'missing' not found" in done.stderr


def test_without_a_backend_the_op_names_what_is_missing():
    done = _python("import torch, backplane; torch.ops.backplane.add(torch.ones(2), torch.ones(2))")
    assert done.returncode != 0
    # PyTorch's own message: the op exists, no CPU kernel is registered, and the
    # dispatcher lists where kernels do exist (Meta, from the core).
    assert "backplane::add" in done.stderr
    assert "CPU" in done.stderr


def test_missing_core_library_says_where_it_looked(tmp_path):
    done = _python("import backplane", BACKPLANE_LIB_DIR=str(tmp_path))
    assert done.returncode != 0
    assert f"libbackplane_core.so not found; looked in ['{tmp_path}']" in done.stderr


def test_torch_version_mismatch_is_named(tmp_path):
    lib = backplane.lib_dir()
    (tmp_path / "libbackplane_core.so").symlink_to(lib / "libbackplane_core.so")
    (tmp_path / "backplane_build.json").write_text('{"version": "0.1.0", "torch_version": "2.0.1"}')
    done = _python("import backplane", BACKPLANE_LIB_DIR=str(tmp_path))
    assert done.returncode != 0
    assert f"was built against torch 2.0.1, this Python runs torch {torch.__version__}" in done.stderr


def test_cxx_abi_mismatch_is_named(tmp_path):
    lib = backplane.lib_dir()
    (tmp_path / "libbackplane_core.so").symlink_to(lib / "libbackplane_core.so")
    other = 1 - int(torch._C._GLIBCXX_USE_CXX11_ABI)
    (tmp_path / "backplane_build.json").write_text(
        f'{{"version": "0.1.0", "torch_version": "{torch.__version__.split("+")[0]}", "cxx11_abi": {other}}}')
    done = _python("import backplane", BACKPLANE_LIB_DIR=str(tmp_path))
    assert done.returncode != 0
    assert f"was built with _GLIBCXX_USE_CXX11_ABI={other}, this torch uses {1 - other}" in done.stderr


def test_module_cli_lists_backends():
    done = subprocess.run(
        [sys.executable, "-m", "backplane", "list", "--backends", "cpu"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": PYTHON_DIR}, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["cpu", "loaded"]
