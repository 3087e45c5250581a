"""`backplane new-backend NAME --triton`: the Python project it writes (one kernel file per
registry op, add implemented, the others unregistered stubs, a manifest whose ops the
package's `python -m NAME.manifest` writes from the registered launchers), checked end to
end from a directory on BACKPLANE_PLUGIN_PATH without installing it: `backplane check`
passes add and reports each stub "not implemented", a stub once registered fails with its
NotImplementedError through the bridge, the scaffold's own tests pass; and the refusals.

Everything that runs a kernel runs in a child process under TRITON_INTERPRET=1 (Triton's
CPU interpreter; process-wide, so never set in this pytest process)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import backplane
from conftest import child_env

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
HERE = backplane.info()["torch"]  # this Backplane's torch, major.minor
OPS = sorted(op.name for op in backplane.ops() if op.namespace == "backplane")

try:
    import triton  # noqa: F401
    HAVE_TRITON = True
except ImportError:
    HAVE_TRITON = False
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="the triton module is not installed")


def cli(*args):
    return subprocess.run([str(BACKPLANE), "new-backend", *map(str, args)], capture_output=True, text=True, timeout=120)


def child(root, *args, interpret=True):
    """Runs `args` (a program and its arguments) with the scaffold at `root` on the search
    paths: its package importable (PYTHONPATH), its manifest found (BACKPLANE_PLUGIN_PATH)."""
    env = child_env(PYTHONPATH=f"{root}:{REPO / 'python'}", BACKPLANE_PLUGIN_PATH=str(root / "acme"),
                    BACKPLANE_PYTHON=sys.executable, BACKPLANE_BACKENDS="none")
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=root, timeout=300)


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory):
    root = tmp_path_factory.mktemp("triton_scaffold") / "acme"
    r = cli("acme", "--triton", "--dir", root)
    assert r.returncode == 0, r.stderr
    assert f"add implemented as the worked example, {len(OPS) - 1} ops stubbed" in r.stdout, r.stdout
    return root


@pytest.mark.parametrize("args,message", [
    (["--triton", "--dispatch-key", "CUDA"], "it takes no --dispatch-key"),
    (["--triton", "--stable-abi"], "it takes no --stable-abi"),
    (["--triton", "--torch-target", "2.13"], "it takes no --torch-target"),
])
def test_triton_refuses_the_flags_of_a_library(tmp_path, args, message):
    r = cli("acme", *args, "--dir", tmp_path / "out")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("backplane new-backend: --triton writes a Python package of Triton kernels"), r.stderr
    assert message in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name,message", [
    ("torch", "names its Python package 'torch', which would shadow a module it needs"),
    ("class", "names its Python package 'class', which would shadow a module it needs or is a Python keyword"),
    ("triton", "'triton' is the name of an in-tree Backplane backend"),
])
def test_names_a_triton_package_cannot_take_are_refused(tmp_path, name, message):
    r = cli(name, "--triton", "--dir", tmp_path / "out")
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_the_usage_names_triton():
    r = cli()
    assert r.returncode == 2 and "backplane new-backend NAME --triton [--dir DIR]" in r.stderr, r.stderr


def test_the_files_one_kernel_file_per_registry_op(scaffold):
    kernels = scaffold / "acme" / "kernels"
    assert sorted(p.stem for p in kernels.glob("*.py") if p.stem != "__init__") == OPS
    add = (kernels / "add.py").read_text()
    assert "@triton.jit" in add and '\n@kernel("add")\ndef add(out, a, b, alpha):' in add
    mul = (kernels / "mul.py").read_text()
    assert '\n# @kernel("mul")\ndef mul(out, a, b):\n    raise NotImplementedError("acme: mul is not implemented")' in mul
    assert "def rms_norm_backward(out0, out1, grad, x, weight, eps):" in (kernels / "rms_norm_backward.py").read_text()
    assert "def scale_(x, s):" in (kernels / "scale_.py").read_text()  # writes its argument: no out
    manifest = (scaffold / "acme" / "libbackplane_acme.manifest.yaml").read_text()
    for line in ("kind: triton", "dispatch_key: CUDA", "python_module: acme", "ops: [add]", 'triton: ">=3.6,<4"',
                 f'torch: ">={HERE}"'):
        assert f"\n{line}\n" in manifest, manifest
    project = (scaffold / "pyproject.toml").read_text()
    assert f'dependencies = ["triton>=3.6,<4", "torch>={HERE}"]' in project
    assert '[project.entry-points."backplane.plugins"]\nacme = "acme"' in project
    assert "TRITON_INTERPRET=1 backplane check acme" in (scaffold / "README.md").read_text()


@needs_triton
def test_backplane_check_passes_add_and_reports_the_stubs_not_implemented(scaffold):
    r = child(scaffold, BACKPLANE, "check", "acme")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {line.split()[1]: line for line in r.stdout.splitlines() if line.startswith("acme ")}
    assert sorted(rows) == OPS, r.stdout
    passed, failed = rows["add"].split()[2:4]
    assert int(passed) > 100 and failed == "0", rows["add"]
    for op in OPS:
        if op != "add":
            assert rows[op].endswith("not implemented on acme"), rows[op]
    assert "every implemented op passed against PyTorch" in r.stdout


@needs_triton
def test_a_stub_registered_fails_with_its_message_until_implemented(scaffold, tmp_path):
    root = tmp_path / "acme"
    shutil.copytree(scaffold, root)
    stale = child(root, sys.executable, "-m", "acme.manifest", "--check", interpret=False)
    assert stale.returncode == 0, stale.stderr
    mul = root / "acme" / "kernels" / "mul.py"
    mul.write_text(mul.read_text().replace('# @kernel("mul")', '@kernel("mul")'))
    stale = child(root, sys.executable, "-m", "acme.manifest", "--check", interpret=False)
    assert stale.returncode == 1 and "is stale: kernels() registers [add, mul]; run python -m acme.manifest" in \
        stale.stderr, stale.stderr
    assert child(root, sys.executable, "-m", "acme.manifest", interpret=False).returncode == 0
    assert "\nops: [add, mul]\n" in (root / "acme" / "libbackplane_acme.manifest.yaml").read_text()
    r = child(root, BACKPLANE, "check", "acme", "--ops", "mul")
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("threw: backplane::mul: the launcher of the triton plugin 'acme' raised NotImplementedError: "
            "acme: mul is not implemented") in r.stdout, r.stdout


@needs_triton
def test_the_scaffolds_own_tests_pass(scaffold):
    r = child(scaffold, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", interpret=False)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
