"""`pip install ./python` registers the torch.backends entry point: `import torch`
alone then loads the plugins and installs torch.npu; TORCH_DEVICE_BACKEND_AUTOLOAD=0
turns it off. Installed with --no-deps and no build isolation (no network)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_python
from fault_plugins import hanging_plugin, plugin_copy

import backplane

ROOT = Path(__file__).resolve().parents[3]


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
    return run_python(code, env={"PYTHONPATH": str(site), "BACKPLANE_LIB_DIR": str(backplane.lib_dir()), **env}, cwd=site)


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


def test_plugins_that_exit_abort_throw_or_hang_while_opening_are_left_out(site, tmp_path):
    """`import torch` used to end silently with rc 0 (exit), die with 134 (abort), hang, or
    lose the plugins after a throw. Each plugin is now opened in a child process first: the
    failing ones are named in one warning and torch.npu is still installed. The second
    import finds the first one's probes in the cache; a plugin that never returns from its
    initializer is killed after BACKPLANE_PROBE_TIMEOUT seconds."""
    faults = tmp_path / "faults"
    for fault in ("exits", "aborts", "throws"):
        plugin_copy(faults, fault)
    env = dict(BACKPLANE_PLUGIN_PATH=str(faults), BACKPLANE_FIXTURE_FAULT="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = _import_torch(site, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "2"
    (warning,) = [line for line in done.stderr.splitlines() if "left out of this process" in line]
    assert "backplane: 3 plugin(s) failed and were left out of this process: " in warning
    assert "ended the process while opening (exit status 0), in a child process probe" in warning
    assert "crashed while opening, with signal 6 (Aborted), in a child process probe" in warning
    assert "its static initializer threw while opening: init_throws" in warning

    hanging_plugin(faults)
    done = _import_torch(site, **env, BACKPLANE_PROBE_TIMEOUT="3")  # the others come from the cache
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "2"
    (warning,) = [line for line in done.stderr.splitlines() if "left out of this process" in line]
    assert "backplane: 4 plugin(s) failed" in warning
    assert "did not finish opening within 3 s in a child process probe (killed); not opened here" in warning
