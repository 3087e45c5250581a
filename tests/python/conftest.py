import os
import sys
from pathlib import Path

import pytest
import torch

# Under pytest-xdist each worker gets an Inductor cache of its own (and so do the
# processes it starts): two workers compiling the same kernel into one shared cache race
# on its kernel_metadata.json, and a package built meanwhile holds an empty one that
# aoti_load_package cannot parse (seen with 2 workers on the CPU machine).
if "PYTEST_XDIST_WORKER" in os.environ and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = f"{default_cache_dir()}_{os.environ['PYTEST_XDIST_WORKER']}"

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

import backplane  # noqa: E402


# Fixtures that compile an AOTInductor package (about a minute each on the GPU machine):
# under pytest-xdist (scripts/test.sh, --dist loadgroup) the tests that share one run
# on one worker, so each package is compiled once per run, not once per worker.
SHARED_PACKAGES = ("plain_package", "packaged")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in SHARED_PACKAGES:
            if name in getattr(item, "fixturenames", ()):
                param = getattr(item, "callspec", None) and item.callspec.params.get(name)
                # No brackets in the name: xdist ignores a group whose name ends in "]".
                item.add_marker(pytest.mark.xdist_group(f"{name}-{param}" if param else name))


@pytest.fixture(scope="session", autouse=True)
def cpu_backend():
    backplane.load("cpu")


@pytest.fixture(scope="session", autouse=True)
def inductor_cxx():
    """AOTInductor packages compiled in this session use a C++ compiler that links
    libstdc++ dynamically, as the pipeline's do: the GPU machine's default CXX links it
    statically, and such a package crashes the process that loads it (load_package now
    refuses one; docs/aoti-findings.md)."""
    from torch._inductor import config

    from backplane.native_libstdcxx import choose_cxx

    with config.patch({"cpp.cxx": (None, choose_cxx(None))}):
        yield


class Plain(torch.nn.Module):
    """Plain aten ops whose output depends on where each element sits: read with the
    wrong strides, the package returns other numbers."""

    def forward(self, x, y):
        return x * 2 + y[:, None, None, :]  # exact in any order of evaluation


@pytest.fixture(scope="session")
def plain_package(tmp_path_factory):
    """(path, layouts) of one AOTInductor package of `Plain` (x: (batch, 3, 4, 5), y: (batch, 5),
    batch 2..1024) with Backplane's layout record; compiled once per session (tens of seconds)."""
    from backplane.package import add_layouts

    batch = torch.export.Dim("batch", min=2, max=1024)
    ep = torch.export.export(Plain(), (torch.randn(3, 3, 4, 5), torch.randn(3, 5)),
                             dynamic_shapes=({0: batch}, {0: batch}))
    path = tmp_path_factory.mktemp("plain") / "plain.pt2"
    torch._inductor.aoti_compile_and_package(ep, package_path=str(path))
    return path, add_layouts(path, ep)
