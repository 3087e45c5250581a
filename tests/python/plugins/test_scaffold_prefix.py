"""A scaffold a vendor can ship from (issue 49): every C++ scaffold builds Release unless told
otherwise, `backplane new-backend` run from a prefix install prints the commands for that
prefix, and the prefix carries the Python side (`PYTHONPATH=<prefix>/lib/python`: the
backplane package and backplane_wheel, the metadata provider of a plugin wheel). The
prefix is a `cmake --install` of the existing build, made once (no rebuild). Building the
scaffold and its wheel from a prefix is the SDK journey's (scripts/sdk_journey.sh)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
BUILD = BACKPLANE.parent.parent
RELEASE_DEFAULT = "if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)"


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = tmp_path_factory.mktemp("prefix")
    subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(p)], check=True, capture_output=True, timeout=120)
    return p


def new_backend(command, tmp_path, name, *flags):
    done = subprocess.run([str(command), "new-backend", name, *flags, "--dir", str(tmp_path / name)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("flags", [["--dispatch-key", "CPU"], ["--dispatch-key", "CUDA"],
                                   ["--dispatch-key", "PrivateUse1"], ["--dispatch-key", "CPU", "--stable-abi"],
                                   ["--dispatch-key", "CUDA", "--stable-abi"]], ids=lambda f: "-".join(f[1:]))
def test_every_cpp_scaffold_defaults_to_release(tmp_path, flags):
    new_backend(BACKPLANE, tmp_path, "acme", *flags)
    cmake = (tmp_path / "acme" / "CMakeLists.txt").read_text()
    assert RELEASE_DEFAULT in cmake and "set(CMAKE_BUILD_TYPE Release CACHE" in cmake
    assert "no CMAKE_BUILD_TYPE given, building Release" in cmake
    # Before find_package: whatever it does, the project's build type is already set.
    assert cmake.index(RELEASE_DEFAULT) < cmake.index("find_package(Backplane")


def _configure(source: Path, build: Path, prefix: Path) -> subprocess.CompletedProcess:
    """cmake's configure of a scaffold against the prefix, with this build's Python and compiler."""
    configure = ["cmake", "-S", str(source), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}"]
    for setting, file in (("BACKPLANE_PYTHON", ".python"), ("CMAKE_CXX_COMPILER", ".cxx")):
        if (BUILD / file).is_file():
            configure.append(f"-D{setting}={(BUILD / file).read_text().strip()}")
    return subprocess.run(configure, capture_output=True, text=True, timeout=300)


def test_configured_without_a_build_type_the_scaffold_is_release(tmp_path, prefix):
    new_backend(prefix / "bin" / "backplane", tmp_path, "acme", "--dispatch-key", "CPU")
    done = _configure(tmp_path / "acme", tmp_path / "b", prefix)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "backplane_acme: no CMAKE_BUILD_TYPE given, building Release" in done.stdout
    assert "CMAKE_BUILD_TYPE:STRING=Release" in (tmp_path / "b" / "CMakeCache.txt").read_text()


def test_the_device_scaffold_precompiles_torch_headers_from_the_prefix(tmp_path, prefix):
    # The PrivateUse1 scaffold (a device layer and a kernel per op: tens of files) asks for
    # precompiled torch headers; the prefix carries the module that makes them.
    new_backend(prefix / "bin" / "backplane", tmp_path, "nova", "--dispatch-key", "PrivateUse1")
    assert "PRECOMPILE_TORCH_HEADERS" in (tmp_path / "nova" / "CMakeLists.txt").read_text()
    assert any(prefix.glob("**/cmake/**/BackplanePrecompile.cmake")), "the prefix lacks BackplanePrecompile.cmake"


def test_precompiled_torch_headers_with_the_stable_abi_are_refused_by_name(tmp_path, prefix):
    new_backend(prefix / "bin" / "backplane", tmp_path, "acme", "--dispatch-key", "CPU", "--stable-abi")
    cmake = tmp_path / "acme" / "CMakeLists.txt"
    text = cmake.read_text()
    assert "STABLE_ABI TORCH_TARGET" in text
    cmake.write_text(text.replace("STABLE_ABI TORCH_TARGET", "STABLE_ABI PRECOMPILE_TORCH_HEADERS TORCH_TARGET"))
    done = _configure(tmp_path / "acme", tmp_path / "b", prefix)
    assert done.returncode != 0
    assert ("backplane_add_plugin(acme): PRECOMPILE_TORCH_HEADERS precompiles the full torch headers, which a "
            "STABLE_ABI plugin must not include: leave one out") in " ".join((done.stdout + done.stderr).split())


def test_the_next_lines_name_the_prefix(tmp_path, prefix):
    out = new_backend(prefix / "bin" / "backplane", tmp_path, "acme", "--dispatch-key", "CPU")
    root = tmp_path / "acme"
    assert (f"cmake -S {root} -B {root}/build -DCMAKE_PREFIX_PATH={prefix} && cmake --build {root}/build") in out, out
    assert f"{prefix}/bin/backplane check acme --plugin-path {root}/build/lib" in out, out
    assert (f"PYTHONPATH={prefix}/lib/python BACKPLANE_PLUGIN_PATH={root}/build/lib python -m pytest "
            f"{root}/tests") in out, out


def test_from_a_build_directory_the_next_lines_say_to_install_first(tmp_path):
    out = new_backend(BACKPLANE, tmp_path, "acme", "--dispatch-key", "CPU")
    assert "-DCMAKE_PREFIX_PATH=<Backplane prefix>" in out
    assert f"`cmake --install {BUILD.resolve()} --prefix P` first" in out, out


def test_the_prefix_python_line_imports_backplane_and_backplane_wheel(tmp_path, prefix):
    # The documented line alone: no BACKPLANE_LIB_DIR, nothing of this checkout on the path.
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKPLANE_")}
    env["PYTHONPATH"] = str(prefix / "lib" / "python")
    code = ("import backplane, backplane_wheel; print(backplane.__file__); print(backplane.lib_dir()); "
            "print(backplane.cmake_prefix_path); print(backplane_wheel.__file__); "
            "print(backplane_wheel.requirements('full'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    package, lib, cmake_prefix, wheel_module, requirements = done.stdout.splitlines()[-5:]
    assert Path(package).is_relative_to(prefix / "lib" / "python" / "backplane")
    assert Path(lib) == prefix / "lib" and Path(cmake_prefix) == prefix
    assert Path(wheel_module) == prefix / "lib" / "python" / "backplane_wheel.py"
    # A full-ABI plugin wheel requires the Backplane it links: its version read from the
    # prefix's dist-info, as from an installed wheel's.
    assert "'backplane==0.1.*'" in requirements, requirements
