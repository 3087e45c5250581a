"""Which plugin serves each op where two plugins serve one device (the core decides;
see core/include/backplane/selection.h for the rule).

    backplane.prefer("rms_norm", "cpu_alt")          # from now on
    with backplane.prefer("rms_norm", "cpu_alt"):    # for a block, then as before
        ...
    backplane.serving()                              # who serves what now, and why
"""
from __future__ import annotations

from dataclasses import dataclass

from ._native import _IDENTIFIER, core


@dataclass(frozen=True)
class Serving:
    op: str
    dispatch_key: str
    serving: str  # the plugin the dispatcher reaches now
    why: str  # "only offer", "preferred for <op>", "loaded first", ...
    offered_by: tuple[str, ...]  # every plugin with a kernel for it, in load order


class prefer:
    """Sets the ordered plugin preference for `op` ("add" or "backplane::add", a plugin's own
    "acme::fused_gelu", "*": every op); no plugins, or None, clears it.

    Takes effect at once, in eager mode and in compiled code alike. Preferences are
    process-wide, and per op the newest still in force applies. As a context manager it
    withdraws exactly its own preference on exit, whatever blocks on other threads did
    meanwhile, so the newest one left applies again (selection.h states the rule); a
    plain call keeps its preference for good. A bad op or plugin name raises ValueError
    naming the preference.
    """

    def __init__(self, op: str, *plugins: str | None) -> None:
        if plugins == (None,):
            plugins = ()
        if not isinstance(op, str) or not all(isinstance(p, str) for p in plugins):
            raise TypeError(f"prefer(op, *plugins) takes strings, or (op, None) to clear; got {(op, *plugins)!r}")
        spec = f"{op}:{','.join(plugins)}"
        if "\x00" in op:
            raise ValueError(f"preference {spec!r}: the op name holds a NUL character")
        for p in plugins:  # checked here: a ',' would reach the core as two names
            if not _IDENTIFIER.fullmatch(p):
                raise ValueError(f"preference {spec!r}: {p!r} is not a plugin name (a plain identifier)")
        self._op, self._plugins = op, list(plugins)
        self._token: int | None = core().hold_preference(op, self._plugins)

    def __enter__(self) -> "prefer":
        if self._token is None:  # entered again after an earlier block ended
            self._token = core().hold_preference(self._op, self._plugins)
        return self

    def __exit__(self, *exc) -> None:
        token, self._token = self._token, None
        if token is not None:
            core().release_preference(token, withdraw=True)

    def __del__(self) -> None:
        # Never a block, or still held: the preference stays for good. Releasing the hold
        # lets the core forget the older ones it hides; it changes no choice.
        token = getattr(self, "_token", None)
        if token is not None:
            try:
                core().release_preference(token, withdraw=False)
            except Exception:  # noqa: BLE001  (interpreter shutdown: the core may be gone)
                pass


def preferences() -> str:
    """Every preference, as BACKPLANE_PREFER writes them: "rms_norm:cpu_alt,cpu;*:cpu"."""
    return core().serving()["preferences"]


def serving() -> list[Serving]:
    """Every (op, dispatch key) a loaded plugin serves; more than one offer is a conflict,
    and `why` says how it was resolved."""
    return [Serving(**{**r, "offered_by": tuple(r["offered_by"])}) for r in core().serving()["serving"]]
