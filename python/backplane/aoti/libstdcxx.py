"""Guards against the AOTInductor crash of docs/aoti-findings.md §1.

A model library compiled by a g++ that links libstdc++ statically carries its own copy
of the C++ runtime. Loaded into Python (where torch's libstdc++ is not globally
visible), that copy runs against another copy's locale state and segfaults inside
`aoti_load_package`. So: compile packages with a compiler that links libstdc++
dynamically, and refuse a package whose model library does not depend on it.
"""
from __future__ import annotations

import functools
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

from .archive import Archive

LIBSTDCXX = "libstdc++.so.6"


class StaticLibstdcxxError(RuntimeError):
    pass


def elf_needed(data: bytes) -> list[str]:
    """DT_NEEDED entries of a 64-bit little-endian ELF shared object."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    needed = []
    for _name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if sh_type != 6:  # SHT_DYNAMIC
            continue
        strtab_offset = sections[link][4]
        for pos in range(offset, offset + size, entsize or 16):
            tag, value = struct.unpack_from("<qQ", data, pos)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                end = data.index(b"\0", strtab_offset + value)
                needed.append(data[strtab_offset + value:end].decode())
    return needed


def package_libraries(package: str | os.PathLike) -> dict[str, list[str]]:
    """Each shared object inside a .pt2 package -> its DT_NEEDED entries."""
    archive = Archive(package)
    return {name: elf_needed(archive.read(name)) for name in archive.names if name.endswith(".so")}


def check_package(package: str | os.PathLike) -> None:
    """Raises StaticLibstdcxxError when a model library in `package` lacks libstdc++.so.6."""
    for name, needed in package_libraries(package).items():
        if LIBSTDCXX not in needed:
            raise StaticLibstdcxxError(
                f"{package}: model library {name} does not depend on {LIBSTDCXX} (it needs {needed}); it was "
                f"compiled by a C++ compiler that links libstdc++ statically, and loading it into Python crashes "
                f"(segfault in aoti_load_package). Re-package with a compiler that links it dynamically, e.g. "
                f"CXX=/usr/bin/g++; see docs/aoti-findings.md")


@functools.lru_cache(maxsize=None)
def links_libstdcxx_dynamically(cxx: str) -> bool:
    """Compiles a one-function shared library with `cxx` and reads its dependencies."""
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp, "probe.cpp"), Path(tmp, "probe.so")
        src.write_text('#include <locale>\n#include <string>\n'
                       'extern "C" int probe() { return (int)std::locale().name().size(); }\n')
        result = subprocess.run([cxx, "-shared", "-fPIC", str(src), "-o", str(lib)], capture_output=True)
        return result.returncode == 0 and LIBSTDCXX in elf_needed(lib.read_bytes())


def choose_cxx(requested: str | None) -> str:
    """The compiler Inductor should use: `requested` (or $CXX, or g++) when it links
    libstdc++ dynamically, else the system g++, else an error naming both."""
    first = requested or os.environ.get("CXX") or "g++"
    candidates = [first] + [c for c in ("/usr/bin/g++", "g++") if c != first]
    for cxx in candidates:
        path = shutil.which(cxx)
        if path and links_libstdcxx_dynamically(path):
            return path
    raise StaticLibstdcxxError(
        f"no C++ compiler found that links {LIBSTDCXX} dynamically (tried {candidates}); AOTInductor packages "
        "built with a static libstdc++ crash when loaded into Python. Set CXX to a g++ that links it dynamically")
