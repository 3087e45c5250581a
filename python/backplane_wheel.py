"""The torch (and Backplane) a wheel requires, decided when it is built: a scikit-build-core
metadata provider for Backplane's own wheel and for plugin wheels
(docs/shipping-a-plugin.md, "Wheels").

    [project]
    dynamic = ["dependencies"]

    [tool.scikit-build.metadata.dependencies]
    provider = "backplane_wheel"
    abi = "full"            # or "stable", with torch-target = "2.13"

- abi "full": the binary runs under the torch it was compiled against only, so the wheel
  pins that torch's minor version (`torch==2.14.*`), read from the build environment (a
  plugin wheel is built with --no-build-isolation: an isolated build would pull another
  torch). A plugin wheel also requires the Backplane it links (`backplane==0.1.*`), whose
  recorded torch must be the same.
- abi "stable": the binary runs under its target torch and every later one:
  `torch>=2.13`, from `torch-target`; and a Backplane whose core offers the stable kernel
  interface.
- abi "core": Backplane's own wheel; as "full", without a Backplane requirement.

A module of its own, outside the `backplane` package and free of torch: a build imports
it without loading any library, and it reads versions from package metadata only.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
from pathlib import Path
from typing import Any, Mapping

# The first Backplane whose core loads stable-ABI kernel plugins (backplane/plugin/stable_api.h).
STABLE_API_SINCE = "0.1"
_KEYS = {"abi", "torch-target"}


class WheelMetadataError(RuntimeError):
    pass


def _major_minor(version: str) -> str:
    match = re.match(r"(\d+)\.(\d+)", version)
    if not match:
        raise WheelMetadataError(f"cannot read a major.minor version from {version!r}")
    return f"{match[1]}.{match[2]}"


def _installed(name: str, why: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        raise WheelMetadataError(
            f"backplane_wheel: {name} is not installed in the Python building this wheel ({why}); "
            f"install it there and build with --no-build-isolation") from None


def _backplane_torch() -> str | None:
    """The torch the installed Backplane was built against (its backplane_build.json)."""
    spec = importlib.util.find_spec("backplane")  # finds the package without importing it
    for location in (spec.submodule_search_locations or []) if spec else []:
        info = Path(location) / "lib" / "backplane_build.json"
        if info.is_file():
            return json.loads(info.read_text())["torch_version"]
    return None


def requirements(abi: str, torch_target: str | None = None) -> list[str]:
    """The wheel's requirements for a binary of `abi` ("full", "stable" or "core")."""
    if abi == "stable":
        if not torch_target or not re.fullmatch(r"\d+\.\d+", torch_target):
            raise WheelMetadataError(
                f"backplane_wheel: abi = \"stable\" needs torch-target = \"<major>.<minor>\" (the oldest torch "
                f"the plugin runs under, as its CMakeLists.txt's TORCH_TARGET), found {torch_target!r}")
        return [f"torch>={torch_target}", f"backplane>={STABLE_API_SINCE}"]
    if abi not in ("full", "core"):
        raise WheelMetadataError(f"backplane_wheel: abi = {abi!r}: expected \"full\", \"stable\" or \"core\"")
    if torch_target:
        raise WheelMetadataError(
            "backplane_wheel: torch-target is for abi = \"stable\"; a full-ABI binary runs under the torch "
            "it was built with only")
    torch = _major_minor(_installed("torch", "a full-ABI binary is pinned to the torch it is built against"))
    if abi == "core":
        return [f"torch=={torch}.*"]
    backplane = _major_minor(_installed("backplane", "a full-ABI plugin links Backplane's core"))
    built = _backplane_torch()
    if built is not None and _major_minor(built) != torch:
        raise WheelMetadataError(
            f"backplane_wheel: the installed Backplane was built against torch {built}, this Python has torch "
            f"{torch}; a full-ABI plugin must be built with the torch of its Backplane")
    return [f"torch=={torch}.*", f"backplane=={backplane}.*"]


def dynamic_metadata(field: str, settings: Mapping[str, Any] | None = None,
                     project: Mapping[str, Any] | None = None) -> list[str]:
    """scikit-build-core's provider hook."""
    settings = dict(settings or {})
    if field != "dependencies":
        raise WheelMetadataError(f"backplane_wheel provides `dependencies`, not `{field}`")
    unknown = settings.keys() - _KEYS
    if unknown:
        raise WheelMetadataError(f"backplane_wheel: unknown settings {sorted(unknown)}; expected {sorted(_KEYS)}")
    return requirements(str(settings.get("abi", "full")), settings.get("torch-target"))
