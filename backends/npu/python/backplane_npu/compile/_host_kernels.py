"""Inductor's C++ kernels as npu work: compiled once, each call queued on the current stream.

Inductor's CPU code generation writes `extern "C" void kernel(const float* in_ptr0,
float* out_ptr0, const int64_t ks0)`. The device keeps its memory in host memory at
tagged addresses, so that code can compute on it once each address is translated. This
module appends a trampoline with one fixed signature,

    extern "C" void backplane_npu_entry(void* const* tensors, const int64_t* ints,
                                        const double* floats)

that calls `kernel` with the arguments in their declared types, compiles the whole with
Inductor's own C++ code cache (so the warm cache serves it too), and hands its address
to the plugin (compile/host_kernels.cpp, through ctypes: the launch is the device
runtime's, not an op, so it has no schema), which queues the call on the current stream
of the tensors' device and translates the addresses on the stream's worker. No Python
runs on the worker: the call is C to C.
"""
from __future__ import annotations

import ctypes
import re

ENTRY = "backplane_npu_entry"
_LAUNCH = "backplane_npu_launch_host_kernel"
_INT_TYPES = {"int64_t", "long", "int", "int32_t", "bool", "uint64_t", "uintptr_t"}
_FLOAT_TYPES = {"float", "double"}


def _argument(kind_index: dict, argtype: str) -> tuple[str, str]:
    """(kind, C++ expression) of one kernel argument: a pointer is a translated
    tensor address, an integer or floating scalar comes from its own array."""
    bare = re.sub(r"\bconst\b", "", argtype).strip()
    if bare.endswith("*"):
        k = kind_index["t"]
        kind_index["t"] += 1
        return "t", f"static_cast<{argtype}>(t[{k}])"
    if bare in _INT_TYPES:
        k = kind_index["i"]
        kind_index["i"] += 1
        return "i", f"static_cast<{bare}>(i[{k}])"
    if bare in _FLOAT_TYPES:
        k = kind_index["f"]
        kind_index["f"] += 1
        return "f", f"static_cast<{bare}>(f[{k}])"
    raise NotImplementedError(
        f"backplane npu: an Inductor kernel takes an argument of type {argtype!r}; "
        "expected a pointer, an integer or a float"
    )


def trampoline(argtypes: list[str]) -> tuple[str, list[str]]:
    """The C++ entry appended to a kernel's source, and the kind of each argument."""
    counts = {"t": 0, "i": 0, "f": 0}
    kinds, exprs = [], []
    for argtype in argtypes:
        kind, expr = _argument(counts, argtype)
        kinds.append(kind)
        exprs.append(expr)
    source = (
        f'\nextern "C" __attribute__((visibility("default"))) void {ENTRY}('
        "void* const* t, const int64_t* i, const double* f) {\n"
        "  (void)t; (void)i; (void)f;\n"
        f"  kernel({', '.join(exprs)});\n"
        "}\n"
    )
    return source, kinds


_launch_fn = None  # the plugin's launch, bound by on_load


def on_load(lib) -> None:
    global _launch_fn
    fn = getattr(lib, _LAUNCH)
    fn.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                   ctypes.c_int64, ctypes.POINTER(ctypes.c_double), ctypes.c_int64, ctypes.c_char_p,
                   ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    _launch_fn = fn


def launch(entry: int, tensors: list, ints: list, floats: list, name: str) -> None:
    """Queues the compiled function at `entry` on the current stream of the tensors'
    device (at once where all are on the CPU); raises RuntimeError with the plugin's
    message where it refuses the tensors (another device, mixed devices) or the entry."""
    message = ctypes.create_string_buffer(1024)
    # Tensor._cdata is the tensor's TensorImpl; the tensors list holds them for the call.
    failed = _launch_fn(entry, (ctypes.c_void_p * len(tensors))(*(t._cdata for t in tensors)), len(tensors),
                        (ctypes.c_int64 * len(ints))(*ints), len(ints), (ctypes.c_double * len(floats))(*floats),
                        len(floats), name.encode(), message, len(message))
    if failed:
        raise RuntimeError(message.value.decode(errors="replace"))


class HostKernel:
    """One compiled kernel: calling it queues it on the current npu stream and returns."""

    __slots__ = ("name", "_entry", "_kinds")

    def __init__(self, name: str, library: ctypes.CDLL, kinds: list[str]):
        self.name = name
        self._entry = ctypes.cast(getattr(library, ENTRY), ctypes.c_void_p).value
        self._kinds = kinds

    def __call__(self, *args) -> None:
        if len(args) != len(self._kinds):
            raise TypeError(f"{self.name} takes {len(self._kinds)} arguments, got {len(args)}")
        tensors, ints, floats = [], [], []
        for kind, arg in zip(self._kinds, args):
            if kind == "t":
                tensors.append(arg)
            elif kind == "i":
                ints.append(int(arg))
            else:
                floats.append(float(arg))
        launch(self._entry, tensors, ints, floats, self.name)


_code_cache = None


def _kernel_code_cache():
    """Inductor's C++ code cache set up as for its CPU kernels: without PyTorch's headers
    and libraries, and with the kernels' prefix header precompiled (the plain
    CppCodeCache has neither, and compiled the decoder LM's kernels several times
    slower than the CPU's)."""
    global _code_cache
    if _code_cache is None:
        from torch._inductor import utils
        from torch._inductor.codecache import CppCodeCache, CppPythonBindingsCodeCache

        # (named clear_on_fresh_inductor_cache before torch 2.14, which keeps that alias)
        on_fresh_cache = getattr(utils, "clear_on_fresh_cache", None) or utils.clear_on_fresh_inductor_cache

        @on_fresh_cache  # fresh_inductor_cache() empties this one too
        class HostKernelCodeCache(CppCodeCache):
            cache: dict = {}
            cpp_compile_command_flags = dict(CppPythonBindingsCodeCache.cpp_compile_command_flags)
            _get_uncompiled_header = CppPythonBindingsCodeCache._get_uncompiled_header

            @classmethod
            def cache_clear(cls) -> None:
                cls.cache.clear()

        _code_cache = HostKernelCodeCache
    return _code_cache


def compile_kernel(async_compile, name: str, argtypes: list[str], source: str):
    """What the generated wrapper calls in place of async_compile.cpp_pybinding: a
    HostKernel, or a future of one where Inductor compiles in a pool."""
    from torch._inductor.async_compile import get_compile_threads
    from torch._inductor.codecache import LambdaFuture

    entry_source, kinds = trampoline(argtypes)
    full = source + entry_source
    cache = _kernel_code_cache()
    if get_compile_threads() <= 1:
        return HostKernel(name, cache.load(full), kinds)
    get_result = cache.load_async(full, submit_fn=async_compile.submit)
    return LambdaFuture(lambda: HostKernel(name, get_result(), kinds))
