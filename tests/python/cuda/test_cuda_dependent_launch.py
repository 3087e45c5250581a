"""Every CUDA kernel may be launched before the kernel ahead of it in the stream has finished
(programmatic dependent launch, backends/cuda/kernels/dependent_launch.cuh), so each must wait
before it touches global memory. A kernel without the wait would read what the kernel before
it has not yet written, only sometimes: these read the sources and the compiled plugin, so CI
without a GPU catches it."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import backplane

KERNELS = Path(__file__).resolve().parents[3] / "backends" / "cuda" / "kernels"
_GLOBAL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(([^{;]*?)\)\s*\{", re.S)


def _sources():
    return sorted(p for p in KERNELS.iterdir() if p.suffix in (".cu", ".cuh"))


def test_every_kernel_waits_for_the_kernel_before_it_first():
    kernels = 0
    for path in _sources():
        text = path.read_text()
        matches = list(_GLOBAL.finditer(text))
        # Every __global__ of the file is a definition the pattern reads (none slips past it).
        assert len(matches) == text.count("__global__"), f"{path.name}: a __global__ function the pattern misses"
        for match in matches:
            kernels += 1
            # launch_kernel() passes the LaunchControl first; the kernel hands it to the wait.
            first_parameter = match.group(2).split(",")[0].strip()
            assert first_parameter == "LaunchControl launch", (
                f"{path.name}: kernel {match.group(1)} must take LaunchControl launch first; found {first_parameter!r}")
            body = text[match.end():].lstrip()
            assert body.startswith("begin_after_previous_grid(launch);\n"), (
                f"{path.name}: kernel {match.group(1)} must begin with begin_after_previous_grid(launch); "
                f"found: {body.splitlines()[0]!r}")
    assert kernels > 0, f"no kernels found under {KERNELS}"


def test_every_kernel_is_launched_through_launch_kernel():
    # A <<<>>> launch would skip the dependent-launch attribute and its launch check.
    for path in _sources():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//")[0]
            assert "<<<" not in code, f"{path.name}:{number}: launch through launch_kernel(), found {line.strip()!r}"


def _cuobjdump():
    """cuobjdump from PATH, the CUDA toolkit, or the copy Triton ships beside torch."""
    found = shutil.which("cuobjdump")
    toolkit = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "cuobjdump"
    try:
        import triton
        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    except ImportError:
        bundled = None
    return next((str(p) for p in (found, toolkit, bundled) if p and Path(p).is_file()), None)


# A global memory access in SASS: loads, stores, atomics, reductions, bulk copies.
_MEMORY = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?(LDG|STG|LD|ST|ATOMG|ATOM|RED|LDGSTS|UBLKCP|UTMALDG)\b",
                     re.M)


@pytest.mark.slow
def test_the_compiled_kernels_wait_before_any_memory_access():
    # The source rule holds only if the compiler keeps every load behind the wait: in the
    # plugin's SASS, each kernel's ACQBULK (griddepcontrol.wait) comes before its first
    # global load, store or atomic.
    lib = backplane.lib_dir() / "libbackplane_cuda.so"
    if not lib.is_file():
        pytest.skip(f"the CUDA plugin was not built ({lib} is missing)")
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (CUDA toolkit or Triton's copy) to read the plugin's SASS")
    sass = subprocess.run([tool, "-sass", str(lib)], capture_output=True, text=True, timeout=300, check=True).stdout
    # The CMake rule: on where every compiled architecture is sm_90 or above.
    archs = {int(a) for a in re.findall(r"^arch = sm_(\d+)", sass, re.M)}
    assert archs, f"cuobjdump names no architecture in {lib}"
    expected = min(archs) >= 90
    functions = re.split(r"\n\s*Function : ", sass)[1:]
    assert functions, f"cuobjdump found no kernels in {lib}"
    for function in functions:
        name = function.split("\n", 1)[0].strip()
        wait = function.find("ACQBULK")
        if not expected:
            assert wait < 0, f"{name}: waits although the build's architectures leave the dependent launch off"
            continue
        assert wait >= 0, f"{name}: no griddepcontrol.wait (ACQBULK) in the compiled kernel"
        access = _MEMORY.search(function)
        assert access is None or access.start() > wait, (
            f"{name}: {access.group(1)} before the wait: {function[access.start():].splitlines()[0].strip()}")
