"""scripts/python_env.sh, the environment test.sh and demo.sh give their Python processes:
where torch has no bytecode cache (the GPU machine sets PYTHONDONTWRITEBYTECODE=1, and each
process there compiled torch's modules from source), bytecode goes to the build folder;
where torch has its bytecode, nothing changes."""
import os
import py_compile
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _sourced(tmp_path, **env):
    """The variables python_env.sh leaves, and what it printed, for a `torch` package
    found first on PYTHONPATH (a stand-in: the script only looks for its bytecode)."""
    script = ('python="$1" BUILD=build source scripts/python_env.sh; '
              'echo "prefix=${PYTHONPYCACHEPREFIX:-}"; echo "dont=${PYTHONDONTWRITEBYTECODE:-}"; '
              'echo "isa=${TORCHINDUCTOR_VEC_ISA_OK:-}"')
    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE", "TORCHINDUCTOR_VEC_ISA_OK")}
    result = subprocess.run(["bash", "-c", script, "python_env", sys.executable], cwd=REPO, capture_output=True,
                            text=True, env={**base, "PYTHONPATH": str(tmp_path), **env}, check=True)
    lines = result.stdout.splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("[")), result.stdout


def _torch_stand_in(tmp_path, with_bytecode):
    package = tmp_path / "torch"
    package.mkdir()
    source = package / "__init__.py"
    source.write_text("")
    if with_bytecode:  # beside the source, as pip leaves it; not under this process's own
        # PYTHONPYCACHEPREFIX, which test.sh sets on the GPU machine (py_compile would follow it)
        cache = package / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
        py_compile.compile(str(source), cfile=str(cache), doraise=True)


def test_without_torch_bytecode_it_goes_to_the_build_folder(tmp_path):
    _torch_stand_in(tmp_path, with_bytecode=False)
    values, printed = _sourced(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert values["prefix"] == str(REPO / "build" / "pycache")
    assert values["dont"] == "", "the processes may write bytecode, into the prefix only"
    assert "(PYTHONDONTWRITEBYTECODE is set)" in printed
    assert values["isa"] == "1"


def test_with_torch_bytecode_nothing_changes(tmp_path):
    _torch_stand_in(tmp_path, with_bytecode=True)
    values, printed = _sourced(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert values["prefix"] == "" and values["dont"] == "1" and "[python]" not in printed


def test_a_prefix_already_set_is_kept(tmp_path):
    _torch_stand_in(tmp_path, with_bytecode=False)
    values, _ = _sourced(tmp_path, PYTHONPYCACHEPREFIX=str(tmp_path / "mine"), TORCHINDUCTOR_VEC_ISA_OK="0")
    assert values["prefix"] == str(tmp_path / "mine") and values["isa"] == "0"
