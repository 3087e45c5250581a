"""Finding and opening libbackplane_core.so, and its C interface (ctypes).

The core library defines every schema and Meta kernel (torch.ops.backplane.*) and
owns the plugin loader; Python only forwards to it, so a backend loaded from Python
and one loaded from C++ are the same record.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
from pathlib import Path

import torch

CORE_LIBRARY = "libbackplane_core.so"


class BackendError(RuntimeError):
    """A backend was named and could not be loaded; the message says what was tried and why."""


class BackendNameError(BackendError, ValueError):
    """A backend name that is not a plain identifier, or a directory holding a NUL."""


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_load_arguments(name: str, directory: str | None) -> None:
    # The C interface takes NUL-terminated strings: "cpu\x00../x" would arrive as
    # "cpu" and load it. The whole Python string is checked here, by the loader's rule.
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise BackendNameError(
            f"invalid backend name {name!r}: expected a plain identifier ([A-Za-z_][A-Za-z0-9_]*); "
            "paths, '/', '..' and NUL are refused"
        )
    if directory is not None and "\x00" in directory:
        raise BackendNameError(f"invalid plugin directory {directory!r}: it holds a NUL character")


def _candidate_dirs() -> list[Path]:
    # An explicit directory is the only one tried: falling back to another build
    # would hide a wrong setting.
    if os.environ.get("BACKPLANE_LIB_DIR"):
        return [Path(os.environ["BACKPLANE_LIB_DIR"])]
    dirs = []
    here = Path(__file__).resolve().parent
    dirs.append(here / "lib")  # an installed package carries its libraries here
    dirs.append(here.parent.parent / "build" / "lib")  # a source checkout after `make build`
    dirs.append(here.parent.parent)  # a prefix install: P/lib/python/backplane beside P/lib's core
    return dirs


def lib_dir() -> Path:
    """The directory holding libbackplane_core.so (and, by default, the plugins)."""
    tried = _candidate_dirs()
    for d in tried:
        if (d / CORE_LIBRARY).is_file():
            return d
    raise BackendError(
        f"{CORE_LIBRARY} not found; looked in {[str(d) for d in tried]}. "
        "Build it with `make build`, or set BACKPLANE_LIB_DIR to the directory that holds it."
    )


def _major_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def _check_torch_matches(directory: Path) -> None:
    # libtorch has no stable C++ ABI across minor releases: opening a core built for
    # another torch fails with an undefined symbol at best. Say so plainly first.
    info_path = directory / "backplane_build.json"
    if not info_path.is_file():
        return
    build = json.loads(info_path.read_text())
    built = build["torch_version"]
    fix = ("rebuild Backplane with this torch (make build TORCH_PYTHON=..., or "
           "pip install --no-build-isolation . with this Python)")
    if _major_minor(built) != _major_minor(torch.__version__):
        raise BackendError(
            f"{directory / CORE_LIBRARY} was built against torch {built}, "
            f"this Python runs torch {torch.__version__}; {fix}"
        )
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    if "cxx11_abi" in build and int(build["cxx11_abi"]) != abi:
        raise BackendError(
            f"{directory / CORE_LIBRARY} was built with _GLIBCXX_USE_CXX11_ABI={int(build['cxx11_abi'])}, "
            f"this torch uses {abi}; {fix}"
        )


class _Core:
    def __init__(self) -> None:
        directory = lib_dir()
        _check_torch_matches(directory)
        path = str(directory / CORE_LIBRARY)
        torch.ops.load_library(path)  # defines the schemas; torch keeps track of it
        self.path = path
        self._lib = ctypes.CDLL(path)  # the same handle again, for the C functions
        # Strings come back malloc'd: taken as raw pointers so they can be freed.
        out = ctypes.POINTER(ctypes.c_void_p)
        for name, args in {
            "backplane_c_load": [ctypes.c_char_p, ctypes.c_char_p, out],
            "backplane_c_backends": [out],
            "backplane_c_ops": [out],
            "backplane_c_info": [out],
            "backplane_c_classes": [out],
            "backplane_c_set_preferences": [ctypes.c_char_p, out],
            "backplane_c_hold_preference": [ctypes.c_char_p, ctypes.c_char_p, out],
            "backplane_c_release_preference": [ctypes.c_uint64, ctypes.c_int, out],
            "backplane_c_serving": [out],
            "backplane_c_apply_selection": [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, out],
            "backplane_c_check": [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, out],
            "backplane_c_environment_backends": [ctypes.c_char_p, out],
            "backplane_c_backend_names": [ctypes.c_char_p, ctypes.c_char_p, out],
            "backplane_c_formula_tree": [ctypes.c_char_p, ctypes.c_size_t, out],
        }.items():
            fn = getattr(self._lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
        self._lib.backplane_c_free.argtypes = [ctypes.c_void_p]
        self._lib.backplane_c_free.restype = None

    def _call(self, name: str, *args):
        text = ctypes.c_void_p()
        status = getattr(self._lib, name)(*args, ctypes.byref(text))
        try:
            # The core writes valid UTF-8 JSON; an error text may quote a file's raw bytes.
            value = ctypes.string_at(text.value).decode(errors="replace") if text.value else ""
        finally:
            self._lib.backplane_c_free(text)
        if status == 1:
            raise BackendError(value)
        if status == 3:  # the caller's input: a preference or an op name, named in the message
            raise ValueError(value)
        if status != 0:
            raise RuntimeError(f"backplane core: {value}")
        return json.loads(value)

    def load(self, name: str, directory: str | None):
        _check_load_arguments(name, directory)
        return self._call("backplane_c_load", name.encode(), directory.encode() if directory else None)

    def backends(self):
        return self._call("backplane_c_backends")

    def ops(self):
        return self._call("backplane_c_ops")

    def classes(self):
        return self._call("backplane_c_classes")

    def info(self):
        return self._call("backplane_c_info")

    def set_preferences(self, spec: str) -> str:
        return self._call("backplane_c_set_preferences", spec.encode())

    def hold_preference(self, op: str, plugins: list[str]) -> int:
        return self._call("backplane_c_hold_preference", op.encode(), ",".join(plugins).encode())

    def release_preference(self, token: int, withdraw: bool) -> str:
        return self._call("backplane_c_release_preference", token, int(withdraw))

    def serving(self):
        return self._call("backplane_c_serving")

    def apply_selection(self, path: str, strict: bool = False, torch_version: str = "",
                        devices: tuple = ()) -> dict:
        """devices: (type, name, capability, driver) of each device to compare the file's
        environment with (selection_environment.py)."""
        # os.fsencode: a path holding bytes that are not UTF-8 reaches the file system as given.
        lines = "\n".join("\t".join(str(f).replace("\t", " ").replace("\n", " ") for f in d) for d in devices)
        return self._call("backplane_c_apply_selection", os.fsencode(path), int(strict), torch_version.encode(),
                          lines.encode())

    def check(self, backend: str, ops: str, gradients: bool):
        return self._call("backplane_c_check", backend.encode(), ops.encode(), int(gradients))

    def environment_backends(self, value: str) -> list[str]:
        """BACKPLANE_BACKENDS's value as names, by the core's rule (the one the `backplane`
        command reads it by); ["none"] for "none". BackendNameError with the core's message."""
        try:
            # os.fsencode: the variable's bytes as the process environment holds them.
            return self._call("backplane_c_environment_backends", os.fsencode(value))
        except ValueError as e:
            raise BackendNameError(str(e)) from None

    def backend_names(self, value: str, what: str) -> list[str]:
        """A --backends value as names, by the core's rule (the `backplane` command's), its
        message naming `what`; ["none"] for "none". BackendNameError with the core's message."""
        try:
            return self._call("backplane_c_backend_names", os.fsencode(value), what.encode())
        except ValueError as e:
            raise BackendNameError(str(e)) from None

    def formula_tree(self, text: str) -> dict:
        """The core parser's tree of a registry formula (backplane/formula.py evaluates it);
        ValueError with the parser's message where it does not parse."""
        encoded = text.encode()  # the length goes too: a NUL stays in
        return self._call("backplane_c_formula_tree", encoded, len(encoded))


_core: _Core | None = None


def core() -> _Core:
    global _core
    if _core is None:
        _core = _Core()
    return _core
