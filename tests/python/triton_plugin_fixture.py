"""What the tests of the in-tree Triton plugin share: SERVED, the ops it serves, and the
fixture the GPU tests load it with (`from triton_plugin_fixture import triton_plugin`; a
module, not a conftest.py: the tests import tests/python/conftest.py by that name)."""
import warnings
from pathlib import Path

import pytest

import backplane

# The ops the plugin serves: one kernel file each (the build writes the manifest's list from them).
SERVED = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "backends" / "triton" / "backplane_triton" /
                                 "kernels").glob("*.py") if p.stem != "__init__")


@pytest.fixture(scope="module")
def triton_plugin():
    """The in-tree Triton plugin, loaded beside the CPU plugin (the reference); a skip
    naming why where there is no triton or the plugin cannot serve here."""
    pytest.importorskip("triton", reason="the Triton plugin needs the triton package")
    backplane.load("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (plugin,) = backplane.load("triton")
    if plugin.status != "loaded":
        pytest.skip(f"the triton plugin is {plugin.status}: {plugin.reason}")
    assert plugin.dispatch_key == "CUDA", plugin
    return plugin
