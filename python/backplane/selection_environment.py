"""Where a selection file was measured: the `environment:` mapping `backplane tune` writes
into every file (core/include/backplane/selection_file.h), and the facts of this process
that applying a file compares it with (the core compares; it warns once naming each
difference, and strict=True refuses).

    backplane.selection_environment.current()
    {"torch": "2.14.1+cu130",
     "devices": [{"type": "cuda", "name": "NVIDIA H200", "capability": "9.0", "driver": "580.159.04"}],
     "plugins": [{"name": "cuda", "version": "0.1.0", "sha256": "..."}]}

Devices: CUDA device 0 where CUDA is available (tune times on it), none otherwise: a CPU
has no name torch reports, so CPU files compare torch and plugins only. The driver is the
kernel driver's version (/proc/driver/nvidia/version), else the CUDA driver API version
torch reports. Limit: one device per type (device 0), as tune measures on one.
"""
from __future__ import annotations

import functools
import hashlib
import re
import stat
import os

_DRIVER_LINE = re.compile(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]*)")


def current(plugins: list[str] | None = None) -> dict:
    """This process's environment, as a selection file records it. plugins: the names to
    record (default: every loaded plugin); each with its version and its file's sha256."""
    import torch

    import backplane

    loaded = {b.name: b for b in backplane.backends() if b.status == "loaded"}
    names = sorted(loaded) if plugins is None else [p for p in plugins if p in loaded]
    return {
        "torch": torch.__version__,
        "devices": [dict(zip(("type", "name", "capability", "driver"), d)) for d in devices()],
        "plugins": [{"name": n, "version": loaded[n].version, "sha256": file_sha256(loaded[n].path)} for n in names],
    }


def devices() -> tuple[tuple[str, str, str, str], ...]:
    """(type, name, capability, driver) of each device a file's environment is compared with.
    Initializes CUDA (a process that forks afterwards cannot use it in the child)."""
    import torch

    if not torch.cuda.is_available():
        return ()
    props = torch.cuda.get_device_properties(0)
    return (("cuda", props.name, f"{props.major}.{props.minor}", _cuda_driver()),)


def devices_for(path: str) -> tuple[tuple[str, str, str, str], ...]:
    """devices() where the file at `path` records a CUDA device or CUDA is initialized already;
    else none: applying a CPU file (or one without `environment:`) must not initialize CUDA
    in a process that may fork later (DataLoader workers). A rough read of the text: the core
    parses the file; this only decides whether to describe."""
    import torch

    if torch.cuda.is_initialized():
        return devices()
    try:  # without blocking, and only a regular file (a FIFO would block; the core names it)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return ()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ()
        text = os.read(fd, 1 << 20).decode("utf-8", errors="replace")
    except OSError:
        return ()
    finally:
        os.close(fd)
    if "environment" in text and re.search(r"type:\s*[\"']?cuda\b", text):
        return devices()
    return ()


@functools.lru_cache(maxsize=1)
def _cuda_driver() -> str:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as f:
            found = _DRIVER_LINE.search(f.read())
            if found:
                return found.group(1)
    except OSError:
        pass
    import torch

    version = torch._C._cuda_getDriverVersion()  # 13000 for CUDA 13.0
    return f"cuda {version // 1000}.{version % 1000 // 10}"


def file_sha256(path: str) -> str:
    """The sha256 of a regular file (as the core computes it, core/src/util/sha256.cpp); ""
    for one that cannot be read."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return ""
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return ""
