"""Plugins installed as Python packages, and the wheel's `backplane` command.

A plugin shipped as its own wheel declares an entry point in the group
`backplane.plugins`, `<backend name> = "<package>"`, where the package's directory holds
libbackplane_<name>.so and its manifest. Those directories join BACKPLANE_PLUGIN_PATH
(after the installed plugins), which the core reads on every search, so
`backplane.load("acme")` and `backplane list` find the backend by name.

A module of its own, outside the `backplane` package and free of torch: the console
script must start fast and must work even where importing backplane fails.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
import warnings
from pathlib import Path

ENTRY_POINT_GROUP = "backplane.plugins"


def entry_point_plugin_dirs() -> list[str]:
    """Directories of plugin packages installed through the `backplane.plugins` group. A
    broken entry is a warning naming it, never an error: it must not stop the others."""
    dirs = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            spec = importlib.util.find_spec(ep.value.split(":")[0])  # located, not imported
            if spec is None or not spec.submodule_search_locations:
                raise ImportError(f"{ep.value!r} is not an importable package")
            dirs.append(str(Path(list(spec.submodule_search_locations)[0]).resolve()))
        except Exception as err:  # noqa: BLE001 -- one bad entry point must not hide the rest
            warnings.warn(f"backplane plugin entry point {ep.name} = {ep.value!r} ignored: {err}", RuntimeWarning)
    return dirs


def add_entry_point_plugins() -> None:
    """Appends the entry-point plugin directories to BACKPLANE_PLUGIN_PATH (child
    processes, the C++ command among them, inherit it)."""
    current = [d for d in os.environ.get("BACKPLANE_PLUGIN_PATH", "").split(":") if d]
    added = [d for d in entry_point_plugin_dirs() if d not in current]
    if added:
        os.environ["BACKPLANE_PLUGIN_PATH"] = ":".join(current + added)


def main() -> None:
    """The wheel's `backplane` command: the C++ one in backplane/bin, with the plugin
    packages on the search path."""
    spec = importlib.util.find_spec("backplane")
    package = Path(list(spec.submodule_search_locations)[0]) if spec and spec.submodule_search_locations else None
    command = package / "bin" / "backplane" if package else None
    if command is None or not command.is_file():
        sys.exit(f"backplane: the C++ command was not found in the backplane package ({package}); "
                 "install the wheel built from the repository root (pip install --no-build-isolation .)")
    add_entry_point_plugins()
    os.execv(str(command), [str(command), *sys.argv[1:]])
