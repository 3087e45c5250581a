"""python/backplane_wheel.py: the torch (and Backplane) a wheel requires, as its build decides
them: a full-ABI binary pins the torch minor it is built against, a stable-ABI one requires
its target torch or later. Each refusal names what was expected and what was found."""
import importlib.metadata

import pytest
import torch

import backplane_wheel
from backplane_wheel import WheelMetadataError, dynamic_metadata

TORCH = ".".join(torch.__version__.split("+")[0].split(".")[:2])


@pytest.fixture
def installed(monkeypatch):
    """Package versions as the build environment reports them; the given ones only."""
    versions = {"torch": torch.__version__}

    def version(name):
        if name not in versions:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(backplane_wheel.importlib.metadata, "version", version)
    monkeypatch.setattr(backplane_wheel, "_backplane_torch", lambda: versions.get("backplane-built-for"))
    return versions


def test_a_stable_plugin_requires_its_target_or_later(installed):
    assert dynamic_metadata("dependencies", {"abi": "stable", "torch-target": "2.13"}) == [
        "torch>=2.13", "backplane>=0.1"]


def test_a_full_abi_plugin_pins_the_torch_minor_it_is_built_against(installed):
    installed.update({"backplane": "0.1.0", "backplane-built-for": torch.__version__})
    assert dynamic_metadata("dependencies", {"abi": "full"}) == [f"torch=={TORCH}.*", "backplane==0.1.*"]


def test_backplanes_own_wheel_pins_torch_only(installed):
    assert dynamic_metadata("dependencies", {"abi": "core"}) == [f"torch=={TORCH}.*"]


def test_a_full_abi_plugin_needs_the_torch_of_its_backplane(installed):
    installed.update({"backplane": "0.1.0", "backplane-built-for": "1.99.0"})
    with pytest.raises(WheelMetadataError, match=f"the installed Backplane was built against torch 1.99.0, this "
                                                 f"Python has torch {TORCH}"):
        dynamic_metadata("dependencies", {"abi": "full"})


def test_a_full_abi_plugin_needs_backplane_installed(installed):
    with pytest.raises(WheelMetadataError, match="backplane is not installed in the Python building this wheel"):
        dynamic_metadata("dependencies", {"abi": "full"})


@pytest.mark.parametrize("settings,message", [
    ({"abi": "stable"}, "abi = \"stable\" needs torch-target = \"<major>.<minor>\".*found None"),
    ({"abi": "stable", "torch-target": "2"}, "found '2'"),
    ({"abi": "full", "torch-target": "2.13"}, "torch-target is for abi = \"stable\""),
    ({"abi": "fast"}, "abi = 'fast': expected \"full\", \"stable\" or \"core\""),
    ({"abi": "stable", "torch_target": "2.13"}, r"unknown settings \['torch_target'\]"),
])
def test_bad_settings_are_refused(installed, settings, message):
    with pytest.raises(WheelMetadataError, match=message):
        dynamic_metadata("dependencies", settings)


def test_it_provides_dependencies_only():
    with pytest.raises(WheelMetadataError, match="provides `dependencies`, not `version`"):
        dynamic_metadata("version", {})
