"""Recording a launcher call for the bridge's launch cache (python/src/triton_launch_cache.h).

On a cache miss the bridge calls record_call(launcher, values, fake): the launcher runs as
always, and each kernel it launches through launch.grid_call is described: the compiled
kernel's CUfunction, grid, threads, shared memory, and each runtime parameter mapped to its
source among `values` (the call's outputs then arguments):
  ("ptr", k, byte_offset)      the data pointer of tensor values[k], plus an offset
  ("int", bits, signed, value) a constant (ints are derived from what the cache's key holds)
  ("float", bits, k)           the Python float values[k]
  ("const_float", bits, value) a constant (the op has no float argument)
  ("null",)                    Triton's trailing global/profile scratch pointer, unused
The bridge replays those launches, from C++, for later calls of an identical key.

A call is described only when all of it can be replayed; otherwise the outcome is
(why, counts): why it is not, and whether that reason should count toward giving up on the
key (tracing and CUDA graph capture are passing states; the rest are not):
- anything but a kernel launch ran: a torch op other than a view (a temporary, a copy, the
  tuner's timing), seen by a dispatch mode held for the call;
- a pointer into memory none of the op's tensors own (a temporary), a float that is none of
  the op's float arguments, or that several are;
- what this replay does not do: tuple or tensor-descriptor parameters, fp16/bf16/bool
  scalars, clusters (num_ctas > 1), cooperative or PDL launches, over 228 KiB of shared
  memory, nonzero global or profile scratch, instrumentation, launch or pre-run hooks,
  grid functions;
- the launch gave no compiled kernel (the interpreter), unless `fake` (tests of the bridge:
  a description is made from the kernel's Python signature; nothing real is launched on a
  replay, the bridge records it instead).

Limits, which a launcher of this plugin keeps: its kernel arguments depend only on what the
key holds (each tensor's dtype, sizes, strides, alignment, device, aliasing; the non-float
arguments' values); float arguments are passed through unchanged, never branched on.
"""
import functools
import inspect
import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_state = threading.local()
_MAX_SHARED = 228 * 1024  # beyond it Triton launches with an attribute this replay does not set
_INT_BITS = {"i8": (8, True), "i16": (16, True), "i32": (32, True), "i64": (64, True),
             "u8": (8, False), "u16": (16, False), "u32": (32, False), "u64": (64, False)}
_FLOAT_BITS = {"fp32": 32, "f32": 32, "fp64": 64}


class NotReplayable(Exception):
    """Why one launch of the call cannot be replayed from C++."""


def active():
    """The recording of the current thread's call, or None."""
    return getattr(_state, "recording", None)


class _OtherWork(TorchDispatchMode):
    """Notes the first torch op of the call that is not a view: work a replay of the kernel
    launches alone would not do."""

    def __init__(self, recording):
        super().__init__()
        self.recording = recording

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view and not self.recording.launching:
            self.recording.refuse(f"the launcher ran {func} besides its kernel launches")
        return func(*args, **(kwargs or {}))


class Recording:
    def __init__(self, values, fake):
        self.values = values
        self.fake = fake
        self.launches = []
        self.why = ""
        self.launching = False  # inside Triton's launch: its own work (the interpreter's copies) is the launch's
        self.sources = [(k, v.untyped_storage().data_ptr(), v.untyped_storage().nbytes())
                        for k, v in enumerate(values) if isinstance(v, torch.Tensor)]
        self.floats = [k for k, v in enumerate(values) if isinstance(v, float)]

    def refuse(self, why):
        self.why = self.why or why

    def launch(self, kernel, grid, launch_fn, args, kwargs):
        self.launching = True
        try:
            compiled = launch_fn(*args, **kwargs)
        finally:
            self.launching = False
        if self.why:
            return compiled
        try:
            self.launches.append(self.describe(kernel, compiled, grid, args, kwargs))
        except NotReplayable as why:
            self.refuse(f"{_name(kernel)}: {why}")
        return compiled

    def outcome(self):
        if self.why:
            return self.why, True
        if not self.launches:
            return "the call launched no kernel", True
        return self.launches

    def describe(self, kernel, compiled, grid, args, kwargs):
        if callable(grid) or not 1 <= len(grid) <= 3:
            raise NotReplayable(f"its grid is {grid!r}, not a tuple of 1 to 3 sizes")
        if getattr(kernel, "pre_run_hooks", None):
            raise NotReplayable("it has pre-run hooks, which a replay would not run")
        if compiled is None and self.fake:
            compiled = _fake_compiled(kernel, args, kwargs)
        if not hasattr(compiled, "function") or not hasattr(compiled, "metadata"):
            raise NotReplayable("the launch gave no compiled kernel (Triton's interpreter runs it in Python)")
        meta = compiled.metadata
        _check_launch(meta)
        params = self._params(kernel, compiled.src, args, kwargs)
        # Triton's launcher appends one pointer per scratch its metadata has (what PyTorch's
        # static launcher does too); zero size checked above, so they are null.
        params += [("null",)] * sum(hasattr(meta, f) for f in ("global_scratch_size", "profile_scratch_size"))
        return {"function": int(compiled.function), "grid": tuple(int(g) for g in grid) + (1,) * (3 - len(grid)),
                "threads": 32 * int(meta.num_warps), "shared": int(meta.shared), "params": params}

    def _params(self, kernel, src, args, kwargs):
        names = _arg_names(kernel)
        bound = _bind(kernel, args, kwargs)
        signature = {(names[key] if isinstance(key, int) else key): ty for key, ty in src.signature.items()}
        constants = {names[key[0]] if isinstance(key, tuple) else (names[key] if isinstance(key, int) else key)
                     for key in getattr(src, "constants", {})}
        params = []
        for name in names:
            ty = signature.get(name, "constexpr")
            if ty == "constexpr" or name in constants:
                continue
            if not isinstance(ty, str) or ty.startswith(("tensordesc", "nvTmaDesc")):
                raise NotReplayable(f"parameter {name} is of type {ty}, which the replay does not pass")
            params.append(self._param(name, ty, bound[name]))
        return params

    def _param(self, name, ty, value):
        if ty.startswith("*"):
            if not isinstance(value, torch.Tensor):
                raise NotReplayable(f"pointer parameter {name} is {type(value).__name__}, not a tensor")
            return self._pointer(name, value.data_ptr())
        if ty in _INT_BITS:
            if isinstance(value, bool) or not isinstance(value, int):
                raise NotReplayable(f"parameter {name} of type {ty} is {value!r}, not an int")
            return ("int", *_INT_BITS[ty], value)
        if ty in _FLOAT_BITS:
            return self._float(name, _FLOAT_BITS[ty], value)
        raise NotReplayable(f"parameter {name} is of type {ty}, which the replay does not pass")

    def _pointer(self, name, address):
        for k, base, nbytes in self.sources:
            if base <= address < base + max(nbytes, 1):
                return ("ptr", k, address - self.values[k].data_ptr())
        raise NotReplayable(f"parameter {name} points to memory that none of the op's tensors own (a temporary)")

    def _float(self, name, bits, value):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise NotReplayable(f"float parameter {name} is {value!r}, not a number")
        if not self.floats:  # no float argument: a value derived from what the key holds
            return ("const_float", bits, float(value))
        same = [k for k in self.floats if self.values[k] == value]
        if len(same) != 1:
            raise NotReplayable(f"float parameter {name} = {value!r} is {len(same)} of the op's float arguments, "
                                "not exactly one")
        return ("float", bits, same[0])


def _check_launch(meta):
    for field, limit in (("global_scratch_size", 0), ("profile_scratch_size", 0)):
        if getattr(meta, field, 0) > limit:
            raise NotReplayable(f"it needs {field} {getattr(meta, field)} bytes, which the replay does not allocate")
    if getattr(meta, "num_ctas", 1) != 1:
        raise NotReplayable(f"it launches clusters of {meta.num_ctas} programs")
    for flag in ("launch_cooperative_grid", "launch_pdl"):
        if getattr(meta, flag, False):
            raise NotReplayable(f"it is a {flag} launch")
    if getattr(meta, "instrumentation_mode", ""):
        raise NotReplayable(f"it is instrumented ({meta.instrumentation_mode})")
    if getattr(meta, "tensordesc_meta", None):
        raise NotReplayable("it takes tensor descriptors")
    if meta.shared > _MAX_SHARED:
        raise NotReplayable(f"it uses {meta.shared} bytes of shared memory (more than {_MAX_SHARED})")


def _hooks_set():
    try:
        from triton import knobs
    except ImportError:  # a Triton without knobs has no launch hooks of this kind
        return False
    hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    # A HookChain (Triton 3.5 on) holds its calls; before it a hook was a function or None.
    return any(h.calls if hasattr(h, "calls") else h is not None for h in hooks)


@functools.lru_cache(maxsize=None)
def _signature(fn):
    return inspect.signature(fn)


def _arg_names(kernel):
    return list(_signature(kernel.fn).parameters)


def _bind(kernel, args, kwargs):
    params = _signature(kernel.fn).parameters
    bound = _signature(kernel.fn).bind(*args, **{k: v for k, v in kwargs.items() if k in params})
    bound.apply_defaults()
    return bound.arguments


def _name(kernel):
    return getattr(kernel.fn, "__name__", repr(kernel))


def _fake_compiled(kernel, args, kwargs):
    """For tests of the bridge without a GPU: what Triton would compile, as far as the
    description reads it, from the kernel's Python signature and this call's values."""
    from types import SimpleNamespace

    signature, bound = {}, _bind(kernel, args, kwargs)
    for name, p in _signature(kernel.fn).parameters.items():
        value = bound[name]
        if "constexpr" in str(p.annotation):
            signature[name] = "constexpr"
        elif isinstance(value, torch.Tensor):
            signature[name] = "*fp32"
        elif isinstance(value, bool) or value is None:
            signature[name] = "constexpr"
        elif isinstance(value, int):
            signature[name] = "constexpr" if value == 1 else ("i32" if -2**31 <= value < 2**31 else "i64")
        else:
            signature[name] = p.annotation if p.annotation in _FLOAT_BITS else "fp32"
    meta = SimpleNamespace(num_warps=kwargs.get("num_warps", 4), shared=0, num_ctas=1, global_scratch_size=0,
                           profile_scratch_size=0)
    return SimpleNamespace(function=id(kernel), metadata=meta, src=SimpleNamespace(signature=signature))


def record_call(launcher, values, fake=False):
    """Runs launcher(*values) with recording on: (result, launches) where the call can be
    replayed, else (result, (why, counts)); see the top."""
    from .launch import tracing

    if tracing():
        return launcher(*values), ("the call is being traced", False)
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        return launcher(*values), ("the current stream is capturing a CUDA graph", False)
    recording = Recording(values, fake)
    if _hooks_set():
        recording.refuse("Triton's launch hooks are set (a profiler?), which a replay would not call")
    outer, _state.recording = active(), recording
    try:
        with _OtherWork(recording):
            result = launcher(*values)
    finally:
        _state.recording = outer
    return result, recording.outcome()
