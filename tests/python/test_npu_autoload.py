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


def _import_torch(site, **env):
    code = "import torch; print(hasattr(torch, 'npu') and torch.npu.device_count())"
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BACKPLANE_BACKENDS")}
    environ.update(PYTHONPATH=str(site), BACKPLANE_LIB_DIR=str(backplane.lib_dir()), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ,
                          cwd=site, timeout=300)


def test_import_torch_autoloads_npu(site):
    done = _import_torch(site)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"


def test_autoload_can_be_turned_off(site):
    done = _import_torch(site, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
