"""`pip install ./python` registers the torch.backends entry point: `import torch`
alone then loads the plugins and installs torch.npu; TORCH_DEVICE_BACKEND_AUTOLOAD=0
turns it off. Installed with --no-deps and no build isolation (no network)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import backplane

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    try:
        import setuptools  # noqa: F401
    except ImportError:
        pytest.skip("setuptools is not installed in this Python; pip cannot build the package offline")
    tmp = tmp_path_factory.mktemp("autoload")
    source = tmp / "src"
    shutil.copytree(ROOT / "python", source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    target = tmp / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return target


def _import_torch(site, first="torch", **env):
    code = f"import {first}; import torch; print(hasattr(torch, 'npu') and torch.npu.device_count())"
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BACKPLANE_BACKENDS")}
    environ.update({"PYTHONPATH": str(site), "BACKPLANE_LIB_DIR": str(backplane.lib_dir()), **env})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ,
                          cwd=site, timeout=300)


def test_import_torch_autoloads_npu(site):
    done = _import_torch(site)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"


def test_importing_backplane_first_autoloads_without_a_warning(site):
    # `import backplane` imports torch, whose entry point then finds backplane half-imported;
    # the autoload is left to backplane's own import instead of failing.
    done = _import_torch(site, first="backplane")
    assert done.returncode == 0, done.stderr
    assert "autoload failed" not in done.stderr
    assert done.stdout.strip() == "2"


def test_autoload_can_be_turned_off(site):
    done = _import_torch(site, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# A failing autoload must never fail `import torch` (torch turns an exception from the
# entry point into "Failed to load the backend extension"): one warning instead,
# naming the cause and the fix, and torch imports without Backplane.
def _autoload_warnings(done):
    return [line for line in done.stderr.splitlines() if "backplane autoload failed" in line]


def test_missing_libraries_warn_once(site, tmp_path):
    done = _import_torch(site, BACKPLANE_LIB_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    (warning,) = _autoload_warnings(done)
    assert f"BackendError: libbackplane_core.so not found; looked in ['{tmp_path}']" in warning
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns autoloading off" in warning


def test_backends_variable_naming_a_missing_plugin_warns_once(site):
    done = _import_torch(site, BACKPLANE_BACKENDS="nosuch")
    assert done.returncode == 0, done.stderr
    (warning,) = _autoload_warnings(done)
    assert "backend 'nosuch' not found" in warning
    assert "To fix: correct or unset BACKPLANE_BACKENDS (now 'nosuch')" in warning


def test_an_unexpected_exception_warns_once(site, tmp_path):
    # A damaged build record: json raises, not the loader.
    lib = backplane.lib_dir()
    (tmp_path / "libbackplane_core.so").symlink_to(lib / "libbackplane_core.so")
    (tmp_path / "backplane_build.json").write_text("{not json")
    done = _import_torch(site, BACKPLANE_LIB_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    (warning,) = _autoload_warnings(done)
    assert "JSONDecodeError" in warning
    assert 'To fix: run `python -c "import backplane"` for the full traceback' in warning


def test_a_build_for_another_torch_warns_once_naming_both(site, tmp_path):
    # The ABI/torch mismatch, as under another torch with this wheel installed.
    import torch

    lib = backplane.lib_dir()
    (tmp_path / "libbackplane_core.so").symlink_to(lib / "libbackplane_core.so")
    (tmp_path / "backplane_build.json").write_text('{"version": "0.1.0", "torch_version": "2.0.1", "cxx11_abi": 1}')
    done = _import_torch(site, BACKPLANE_LIB_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    (warning,) = _autoload_warnings(done)
    assert f"was built against torch 2.0.1, this Python runs torch {torch.__version__}" in warning
