"""torch.ops.backplane.<op>(...) from Python at what a generated aten binding costs.

torch.ops' generic path converts every argument against the schema through pybind11, a
cost per call that decides eager speed on small tensors (see bench/results/). For each
registry op (and each loaded plugin's own op) the packet (`torch.ops.backplane.add`) and
its overload (`.default`) get a per-op subclass whose `__call__` is a FastCall from the
`_fast_call` extension (python/src/fast_call.cpp): it converts the arguments it can
convert exactly and calls the op boxed through the dispatcher. The objects stay what they
were (the same identity, isinstance OpOverloadPacket / OpOverload), so torch.compile,
torch.export and FX see no difference. Anything the fast path does not convert (a
__torch_function__ subclass or mode, JIT tracing, a numpy scalar, a keyword it does not
know) goes to torch's own path unchanged, errors included.

Off with BACKPLANE_FAST_CALL=0; status() says whether it is on, and why not.
"""
from __future__ import annotations

import inspect
import os

from torch._ops import OpOverload, OpOverloadPacket

_native = None
_status = "not installed yet"


def _extension():
    """The _fast_call module beside libbackplane_core.so, or None (and _status says why)."""
    global _native, _status
    if _native is not None:
        return _native
    from .extensions import load_extension

    _native, why = load_extension("_fast_call")
    if _native is None:
        _status = f"off: {why}"
    return _native


def _fast_subclass(base: type, qualified: str, fast) -> type:
    # __slots__ = (): the subclass keeps its base's layout, so an existing object's
    # __class__ can be switched to it. `fast` is not a descriptor: called without self.
    # __signature__: what inspect.signature gave for the base's __call__, without self.
    signature = inspect.signature(base.__call__)
    signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return type(base.__name__, (base,), {"__slots__": (), "__call__": fast, "__module__": base.__module__,
                                         "__signature__": signature,
                                         "__qualname__": f"{base.__qualname__}[{qualified}, backplane fast call]"})


def install(rows) -> None:
    """Gives each op in `rows` (core().ops() rows: name, namespace) the fast call, once."""
    global _status
    if os.environ.get("BACKPLANE_FAST_CALL", "1") == "0":
        _status = "off: BACKPLANE_FAST_CALL=0"
        return
    native = _extension()
    if native is None:
        return
    import torch

    for row in rows:
        namespace, op = row["namespace"], row["name"].rpartition("::")[2]
        packet = getattr(getattr(torch.ops, namespace), op)
        if type(packet) is not OpOverloadPacket or getattr(packet, "_has_torchbind_op_overload", False):
            continue  # already installed, or an op that takes a class: torch's path decides
        if len(packet.overloads()) != 1:
            continue  # torch picks among overloads by the arguments; the fast call knows one
        overload = packet.default
        # _pyobj_dispatcher: an op dispatched from Python (newer torch only)
        if type(overload) is not OpOverload or getattr(overload, "_pyobj_dispatcher", None) is not None:
            continue
        qualified = f"{namespace}::{op}"
        for target in (packet, overload):
            fast = native.make(qualified, "", target._op)
            if fast is not None:  # None: an argument type the fast path leaves to torch
                target.__class__ = _fast_subclass(type(target), qualified, fast)
    _status = "on"


def status() -> str:
    """"on", or "off: <why>"."""
    return _status
