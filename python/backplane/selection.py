"""Which plugin serves each op where two plugins serve one device (the core decides;
see core/include/backplane/selection.h for the rule).

    backplane.prefer("rms_norm", "cpu_alt")          # from now on
    with backplane.prefer("rms_norm", "cpu_alt"):    # for a block, then as before
        ...
    backplane.serving()                              # who serves what now, and why
    backplane.load("cpu", "cpu_alt", selection="sel.yaml")  # by call size, as `backplane tune` measured
    backplane.apply_selection("sel.yaml")            # the same, for plugins loaded already
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from ._native import _IDENTIFIER, core


@dataclass(frozen=True)
class Serving:
    op: str
    dispatch_key: str
    serving: str  # the plugin the dispatcher reaches now
    why: str  # "only offer", "preferred for <op>", "loaded first", ...
    offered_by: tuple[str, ...]  # every plugin with a kernel for it, in load order
    # A selection file's split by call size: ((65536, "cpu_alt"), (None, "cpu")); up_to is the
    # element count of the largest Tensor argument, None for every larger call. Empty: one plugin.
    buckets: tuple[tuple[int | None, str], ...] = ()


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
    return [Serving(**{**r, "offered_by": tuple(r["offered_by"]),
                       "buckets": tuple((b["up_to"], b["plugin"]) for b in r["buckets"])})
            for r in core().serving()["serving"]]


def selection_file() -> str:
    """The path of the selection file in force ("" when none): from apply_selection,
    backplane.load(..., selection=), or BACKPLANE_SELECTION when the core loaded."""
    return core().serving()["selection_file"]


def apply_selection(path: str | os.PathLike | None) -> str:
    """Applies a selection file (written by `backplane tune`; the format is in
    core/include/backplane/selection_file.h and docs/selection.md): where two loaded plugins
    serve an op on one device, the file's plugin for the call's size serves it, from now
    on, in compiled code too. None clears it. A preference for the op itself (prefer())
    still wins over the file.

    In a distributed job (torch.distributed initialized, more than one rank) every rank
    must apply the same file, so that every rank runs the same plugin for the same call:
    the ranks compare the file's contents, and a rank whose file differs raises ValueError
    naming the ranks that disagree (on every rank, before anything is applied).

    Raises ValueError naming the file, line and column for one that is not a selection
    file. Returns the path in force."""
    if path is None:
        return core().apply_selection("")
    path = os.fspath(path)
    _require_same_file_on_every_rank(path)
    return core().apply_selection(os.path.abspath(path))


def _require_same_file_on_every_rank(path: str) -> None:
    import sys

    dist = sys.modules.get("torch.distributed")  # never imported for this: a job that uses it has
    if dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        digest = f"unreadable ({e.strerror})"
    digests = [None] * dist.get_world_size()
    dist.all_gather_object(digests, digest)
    if len(set(digests)) > 1:
        groups: dict[str, list[int]] = {}
        for rank, d in enumerate(digests):
            groups.setdefault(d, []).append(rank)
        seen = "; ".join(f"ranks {ranks}: {d[:12] if not d.startswith('unreadable') else d}"
                         for d, ranks in groups.items())
        raise ValueError(f"selection file {path}: the ranks of this job read different files ({seen}); every rank "
                         "must apply the same file, or ranks would run different plugins for the same call")
