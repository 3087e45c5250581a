"""The fixture the GPU tests of the Triton plugin share: `from triton_plugin_fixture import
triton_plugin` (a module, not a conftest.py: the tests import tests/python/conftest.py by
that name)."""
import warnings

import pytest

import backplane


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
