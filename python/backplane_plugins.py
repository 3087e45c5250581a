"""Plugins installed as Python packages, probing plugins before an implicit load, and the
wheel's `backplane` command.

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
import json
import os
import stat
import subprocess
import sys
import tempfile
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


# `backplane __probe_in_child NAME DIRS` (cli/plugin_probe.cpp) runs the child probe, owns
# its timeout (BACKPLANE_PROBE_TIMEOUT) and words the verdict as `backplane list` does:
# these are the words of its one line.
_VERDICT_PASSED = "backplane-probe: passed\n"
_VERDICT_FAILED = "backplane-probe: failed: "


def probe_first(names, found: list[dict], lib_dir) -> list[str]:
    """`names` (each a name or a comma list, as backplane.load takes them) less the
    backends that must not be opened in this process, for the loads nobody asked for in
    code: the `torch.backends` autoload and BACKPLANE_BACKENDS at import.

    Each name `found` (the core's backend records) lists as available is first opened in a
    child process by the `backplane` command, as `backplane list` does, unless a probe of
    the same files is cached. One that crashes, exits, hangs or is refused there is left out,
    and one RuntimeWarning names each with its reason. Names not available (missing,
    rejected) pass on: load() says why. Without the `backplane` command beside the core's
    lib directory nothing is probed (the load decides, as when `backplane list` cannot
    start its child)."""
    wanted = {n.strip() for name in names for n in name.split(",")}
    # A plugin of kind triton is no library: there is no dlopen to try in a child, and the
    # bridge turns whatever its package raises into a reason, so it is not probed.
    records = {r["name"]: r for r in found if r["name"] in wanted and r["status"] == "available"
               and r.get("kind", "shared_library") == "shared_library"}
    command = Path(lib_dir).parent / "bin" / "backplane"
    if not records or not command.is_file():
        return list(names)
    failures = _probe_all(list(records.values()), str(command), Path(lib_dir) / "libbackplane_core.so")
    if failures:
        listed = "; ".join(f"{name} ({records[name]['path']}): {why}" for name, why in failures.items())
        warnings.warn(f"backplane: {len(failures)} plugin(s) failed and were left out of this process: {listed}. "
                      "Fix or remove each from the plugin search path; `backplane list` shows them all.",
                      RuntimeWarning, stacklevel=3)
    # Only the failed names are taken out; the rest reach load() as given, for it to parse.
    kept = [",".join(n for n in name.split(",") if n.strip() not in failures) for name in names]
    return [name for name, was in zip(kept, names) if name or not was]


def _probe_all(records: list[dict], command: str, core_library: Path) -> dict[str, str]:
    """name -> why, for each record whose probe failed. Uncached ones run at once, in
    parallel, each under the command's own timeout."""
    cache = _read_probe_cache()
    identities = {r["name"]: _identity(r, core_library) for r in records}
    failures, running = {}, {}
    for r in records:
        cached = cache.get(r["path"])
        if isinstance(cached, dict) and cached.get("identity") == identities[r["name"]]:
            if cached.get("failure"):
                failures[r["name"]] = str(cached["failure"])
            continue
        try:  # DIRS empty: the child searches what load(name) here searches
            running[r["name"]] = subprocess.Popen([command, "__probe_in_child", r["name"], ""],
                                                  stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                                  encoding="utf-8", errors="replace")
        except OSError:
            continue  # cannot probe: the load here decides, as `backplane list` does
    probed = False
    for name, child in running.items():
        said, _ = child.communicate()
        if child.returncode != 0 or not said.startswith((_VERDICT_PASSED, _VERDICT_FAILED)):
            continue  # no verdict (the command itself failed): the load here decides, uncached
        failure = said[len(_VERDICT_FAILED):].rstrip("\n") if said.startswith(_VERDICT_FAILED) else None
        if failure:
            failures[name] = failure
        path = next(r["path"] for r in records if r["name"] == name)
        cache[path] = {"identity": identities[name], "failure": failure}
        probed = True
    if probed:
        _write_probe_cache(cache)
    return failures


def _identity(record: dict, core_library: Path) -> list:
    """What a probe's outcome depends on: the plugin, its manifest, its registry fragment and
    the core, each as (path, size, mtime); a rebuild or an edit of any probes again."""
    plugin = Path(record["path"])
    files = [plugin, plugin.parent / f"libbackplane_{record['name']}.manifest.yaml", core_library]
    if record.get("registry"):
        files.append(Path(record["registry"]))
    identity = []
    for f in files:
        try:
            st = os.stat(f)
            identity.append([str(f), st.st_size, st.st_mtime_ns])
        except OSError:
            identity.append([str(f), None, None])
    return identity


def _probe_cache_path() -> Path | None:
    try:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except RuntimeError:  # no home directory: nothing is cached
        return None
    return Path(base) / "backplane" / "plugin-probes.json"


def _read_probe_cache() -> dict:
    # A missing or damaged cache only costs a probe. Opened without blocking and read only
    # when a regular file: a FIFO there must not hang `import torch`.
    path = _probe_cache_path()
    if path is None:
        return {}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return {}
            cache = json.loads(f.read())
        return cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_probe_cache(cache: dict) -> None:
    # Written whole and renamed into place: a process reading it meanwhile sees the old
    # one or the new one. An unwritable cache only costs a probe next time.
    path = _probe_cache_path()
    if path is None:
        return
    written = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".plugin-probes.", delete=False) as out:
            written = out.name
            json.dump(cache, out)
        os.replace(written, path)
    except OSError:
        if written:
            Path(written).unlink(missing_ok=True)


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
