"""Which plugin serves each op where two plugins serve one device (the core decides;
see core/include/backplane/selection.h for the rule).

    backplane.prefer("rms_norm", "cpu_alt")          # from now on
    with backplane.prefer("rms_norm", "cpu_alt"):    # for a block, then as before
        ...
    backplane.serving()                              # who serves what now, and why
"""
from __future__ import annotations

from dataclasses import dataclass

from ._native import core


@dataclass(frozen=True)
class Serving:
    op: str
    dispatch_key: str
    serving: str  # the plugin the dispatcher reaches now
    why: str  # "only offer", "preferred for <op>", "loaded first", ...
    offered_by: tuple[str, ...]  # every plugin with a kernel for it, in load order


class prefer:
    """Sets the ordered plugin preference for `op` ("*": every op); no plugins clears it.

    Takes effect at once, in eager mode and in compiled code alike. Used as a context
    manager, it restores the previous preferences on exit.
    """

    def __init__(self, op: str, *plugins: str) -> None:
        if not isinstance(op, str) or not all(isinstance(p, str) for p in plugins):
            raise TypeError("prefer(op, *plugins) takes strings")
        # An op may be a plugin's own ("acme::fused_gelu"); no other ':' fits the spec grammar.
        bad = [s for s in (op.replace("::", ""), *plugins) if any(c in s for c in ":;,\x00")]
        if bad:
            raise ValueError(f"prefer: {bad[0]!r} is not an op or plugin name")
        self._saved = preferences()
        rest = [part for part in self._saved.split(";") if part and part.split(":", 1)[0] != op]
        if plugins:
            rest.append(f"{op}:{','.join(plugins)}")
        core().set_preferences(";".join(rest))

    def __enter__(self) -> "prefer":
        return self

    def __exit__(self, *exc) -> None:
        core().set_preferences(self._saved)


def preferences() -> str:
    """Every preference, as BACKPLANE_PREFER writes them: "rms_norm:cpu_alt,cpu;*:cpu"."""
    return core().serving()["preferences"]


def serving() -> list[Serving]:
    """Every (op, dispatch key) a loaded plugin serves; more than one offer is a conflict,
    and `why` says how it was resolved."""
    return [Serving(**{**r, "offered_by": tuple(r["offered_by"])}) for r in core().serving()["serving"]]
