"""Graph capture and replay on the npu (device/npu_graph.h): torch.npu.NPUGraph,
torch.npu.graph and torch.npu.is_current_stream_capturing (pools: _memory's
graph_pool_handle), in
the shape of their torch.cuda namesakes; and, on torch 2.12 and later, the device's
implementation behind torch.accelerator.Graph (registered at load; on older torch that
API does not exist and nothing is registered).

    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):          # captures on a side stream
        static_out = step(static_in)  # queued work is recorded, not run
    static_in.copy_(fresh)
    g.replay()                        # the whole recording as one submission

What a capture refuses (raising where it happens, then at capture end): host waits and
reads of captured work (.item(), .cpu(), print, synchronize, event waits), and ops served
by the CPU fallback that draw random numbers or whose output shapes depend on values.
"""
from __future__ import annotations

import ctypes

import torch

_lib = None
_CAPTURE_MODES = ("default", "global", "thread_local", "relaxed")


def on_load(lib) -> None:
    global _lib
    msg = [ctypes.c_char_p, ctypes.c_size_t]
    u64p = ctypes.POINTER(ctypes.c_uint64)
    for fn, args, res in [
        ("backplane_npu_graph_create", [], ctypes.c_void_p),
        ("backplane_npu_graph_destroy", [ctypes.c_void_p], None),
        ("backplane_npu_graph_capture_begin", [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, *msg], ctypes.c_int),
        ("backplane_npu_graph_capture_end", [ctypes.c_void_p, *msg], ctypes.c_int),
        ("backplane_npu_graph_replay", [ctypes.c_void_p, *msg], ctypes.c_int),
        ("backplane_npu_graph_reset", [ctypes.c_void_p, *msg], ctypes.c_int),
        ("backplane_npu_graph_info", [ctypes.c_void_p, u64p, *msg], ctypes.c_int),
        ("backplane_npu_is_current_stream_capturing", [ctypes.c_int, ctypes.POINTER(ctypes.c_int), *msg], ctypes.c_int),
        ("backplane_npu_register_accelerator_graph", [], ctypes.c_int),
    ]:
        getattr(lib, fn).argtypes = args
        getattr(lib, fn).restype = res
    _lib = lib
    if hasattr(torch.accelerator, "Graph"):
        lib.backplane_npu_register_accelerator_graph()


def _checked(fn: str, *args) -> None:
    buf = ctypes.create_string_buffer(2048)
    if getattr(_lib, fn)(*args, buf, len(buf)) != 0:
        raise RuntimeError(buf.value.decode(errors="replace"))


def _pool_id(pool) -> tuple[int, int]:
    if pool is None:
        return (0, 0)
    if (not isinstance(pool, tuple) or len(pool) != 2
            or not all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p < 2**64 for p in pool)):
        raise TypeError(f"backplane npu: expected a graph pool as a pair of non-negative ints (graph_pool_handle() or "
                        f"NPUGraph.pool()), got {pool!r}")
    return pool


def is_current_stream_capturing(device=None) -> bool:
    from ._device_index import device_index

    capturing = ctypes.c_int()
    _checked("backplane_npu_is_current_stream_capturing", device_index(device), ctypes.byref(capturing))
    return bool(capturing.value)


class NPUGraph:
    """A recording of work queued on one npu stream, replayed as one submission."""

    def __init__(self, keep_graph: bool = False):  # keep_graph: accepted as torch.cuda's; changes nothing here
        self._handle = _lib.backplane_npu_graph_create()

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        """Begins capturing the current stream (torch.npu.graph picks a side stream).
        Every mode refuses host waits on the capturing stream, from any thread."""
        if capture_error_mode not in _CAPTURE_MODES:
            raise ValueError(f"backplane npu: capture_error_mode must be one of {_CAPTURE_MODES}, got "
                             f"{capture_error_mode!r}")
        a, b = _pool_id(pool)
        _checked("backplane_npu_graph_capture_begin", self._handle, a, b)

    def capture_end(self) -> None:
        _checked("backplane_npu_graph_capture_end", self._handle)

    def instantiate(self) -> None:
        """Nothing to do: a recording is launchable as it stands."""

    def replay(self) -> None:
        """Queues the recording on the current stream of its device, as one task."""
        _checked("backplane_npu_graph_replay", self._handle)

    def reset(self) -> None:
        """Drops the recording and releases its memory pool; replay is refused afterwards."""
        _checked("backplane_npu_graph_reset", self._handle)

    def _info(self) -> tuple[int, int, int]:
        out = (ctypes.c_uint64 * 3)()
        _checked("backplane_npu_graph_info", self._handle, out)
        return out[0], out[1], out[2]

    def pool(self) -> tuple[int, int]:
        """The id of this graph's memory pool, to share it with another capture."""
        a, b, _ = self._info()
        return (a, b)

    def node_count(self) -> int:
        """Tasks and event records in the recording (0: none)."""
        return self._info()[2]

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle and _lib is not None:
            _lib.backplane_npu_graph_destroy(handle)


class graph:  # noqa: N801 (torch.cuda.graph's spelling)
    """Captures the block into `npu_graph` on `stream` (default: a side stream of the
    current device, one per device as torch.cuda uses), after waiting for the device. A
    block that raises leaves the graph with no capture."""

    _default_streams: dict = {}

    def __init__(self, npu_graph: NPUGraph, pool=None, stream: torch.Stream | None = None,
                 capture_error_mode: str = "global"):
        if not isinstance(npu_graph, NPUGraph):
            raise TypeError(f"backplane npu: torch.npu.graph expects a torch.npu.NPUGraph, got "
                            f"{type(npu_graph).__name__}")
        self.npu_graph, self.pool, self.capture_error_mode = npu_graph, _pool_id(pool), capture_error_mode
        self.stream = stream
        self._stream_context = None

    def __enter__(self):
        from . import current_device, stream as stream_context, synchronize, Stream

        device = current_device()
        capture_stream = self.stream or graph._default_streams.setdefault(device, Stream(device))
        synchronize(device)
        self._stream_context = stream_context(capture_stream)
        self._stream_context.__enter__()
        try:
            self.npu_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self._stream_context.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type, exc, tb):
        try:
            self.npu_graph.capture_end()
        except RuntimeError:
            if exc_type is None:
                raise
            # The block's own error (often the refusal that spoilt the capture) is the one to see.
        finally:
            self._stream_context.__exit__(None, None, None)
        if exc_type is not None:
            self.npu_graph.reset()  # a block that raised recorded only part of itself: keep none of it
        return False
