"""Every CUDA kernel may be launched before the kernel ahead of it in the stream has finished
(programmatic dependent launch, backends/cuda/kernels/dependent_launch.cuh), so each must wait
before it touches global memory. A kernel without the wait would read what the kernel before
it has not yet written, only sometimes: this reads the sources, so CI without a GPU catches it."""
import re
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[2] / "backends" / "cuda" / "kernels"
_GLOBAL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\([^{;]*?\)\s*\{", re.S)


def _sources():
    return sorted(p for p in KERNELS.iterdir() if p.suffix in (".cu", ".cuh"))


def test_every_kernel_waits_for_the_kernel_before_it_first():
    kernels = 0
    for path in _sources():
        text = path.read_text()
        for match in _GLOBAL.finditer(text):
            kernels += 1
            body = text[match.end():].lstrip()
            assert body.startswith("wait_for_previous_grid();\n"), (
                f"{path.name}: kernel {match.group(1)} must begin with wait_for_previous_grid(); "
                f"found: {body.splitlines()[0]!r}")
    assert kernels >= 10, f"found only {kernels} kernels under {KERNELS}: the pattern no longer matches"


def test_every_kernel_is_launched_through_launch_kernel():
    # A <<<>>> launch would skip the dependent-launch attribute and its launch check.
    for path in _sources():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//")[0]
            assert "<<<" not in code, f"{path.name}:{number}: launch through launch_kernel(), found {line.strip()!r}"
