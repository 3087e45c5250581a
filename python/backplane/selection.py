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
import stat
import threading
import warnings
from dataclasses import dataclass, field

from ._native import _IDENTIFIER, core
from .rank_exchange import exchange_with_deadline


@dataclass(frozen=True)
class Serving:
    op: str
    dispatch_key: str
    serving: str  # the plugin the dispatcher reaches now
    why: str  # "only offer", "preferred for <op>", "loaded first", ...
    offered_by: tuple[str, ...]  # every plugin with a kernel for it, in load order
    # A selection file's split by call size: ((65536, "cpu_alt"), (None, "cpu")); up_to is the
    # element count of the largest Tensor argument, None for every larger call. Empty: one plugin.
    # "inductor" names Inductor's code for the reference (compiled code only; docs/selection.md).
    # Where the file keys the op by dtype: the split of the dtypes it does not name.
    buckets: tuple[tuple[int | None, str], ...] = ()
    # The file's split for each dtype it names: {"bfloat16": ((None, "inductor"),)}.
    by_dtype: dict = field(default_factory=dict)


class prefer:
    """Sets the ordered plugin preference for `op` ("add" or "backplane::add", a plugin's own
    "acme::fused_gelu", "*": every op); no plugins, or None, clears it.

    Takes effect at once, in eager mode and in compiled code alike. Preferences are
    process-wide, and per op the newest still in force applies. As a context manager it
    withdraws exactly its own preference on exit, whatever blocks on other threads did
    meanwhile, so the newest one left applies again (selection.h states the rule); a
    plain call keeps its preference for good. One object may be entered again, also inside
    its own block: each entry holds a preference of its own, and each exit withdraws the
    one its entry holds. A bad op or plugin name raises ValueError naming the preference.
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
        # The construction's hold: the first block takes it over; never entered, it stays for good.
        self._unentered: int | None = core().hold_preference(op, self._plugins)
        # Per thread, the holds of the blocks open on it, innermost last: a `with` block
        # begins and ends on one thread, so each exit finds its own entry's hold. Limit:
        # coroutines interleaving blocks of one object on one thread share that thread's list.
        self._blocks: dict[int, list[int]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> "prefer":
        with self._lock:
            token, self._unentered = self._unentered, None
        if token is None:  # entered again: during a block of its own, or after one ended
            token = core().hold_preference(self._op, self._plugins)
        with self._lock:
            self._blocks.setdefault(threading.get_ident(), []).append(token)
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            thread = threading.get_ident()
            if thread not in self._blocks:
                # Exited on another thread than it was entered on (an ExitStack closed by a
                # worker): the block opened last, on whichever thread, is the one ending.
                if not self._blocks:
                    raise RuntimeError(f"prefer({self._op!r}, ...): __exit__ without a block open")
                thread = next(reversed(self._blocks))
            held = self._blocks[thread]
            token = held.pop()
            if not held:
                del self._blocks[thread]
        core().release_preference(token, withdraw=True)

    def __del__(self) -> None:
        # Never a block: the preference stays for good. Releasing the hold lets the core
        # forget the older ones it hides; it changes no choice.
        token = getattr(self, "_unentered", None)
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
                       "buckets": tuple((b["up_to"], b["plugin"]) for b in r["buckets"] if not b["dtype"]),
                       "by_dtype": _by_dtype(r["buckets"])})
            for r in core().serving()["serving"]]


def _by_dtype(buckets: list[dict]) -> dict:
    found: dict = {}
    for b in buckets:
        if b["dtype"]:
            found.setdefault(b["dtype"], []).append((b["up_to"], b["plugin"]))
    return {dtype: tuple(split) for dtype, split in found.items()}


def selection_file() -> str:
    """The path of the selection file in force ("" when none): from apply_selection,
    backplane.load(..., selection=), or BACKPLANE_SELECTION when the core loaded."""
    return core().serving()["selection_file"]


def apply_selection(path: str | os.PathLike | None, strict: bool = False) -> str:
    """Applies a selection file (written by `backplane tune`; the format is in
    core/include/backplane/selection_file.h and docs/selection.md): where two loaded plugins
    serve an op on one device, the file's plugin for the call's size serves it, from now
    on, in compiled code too. `inductor` buckets are resolved while compiling: code compiled
    before keeps its choice until it recompiles (torch._dynamo.reset()), which a warning says. None clears it. A preference for the op itself (prefer())
    still wins over the file.

    A bucket naming a plugin that is not loaded (a misspelling, or a plugin this machine
    lacks) falls back to the rule without the file: a warning names each such bucket and
    the plugins loaded; strict=True refuses the file instead (ValueError, nothing applied).
    A file measured elsewhere (its `environment:`: torch, device, driver, plugin versions and
    file hashes; selection_environment.py) warns once naming each difference; strict=True
    refuses it. A bucket may name `inductor`: Inductor's code for the op's reference, traced
    into compiled graphs (backplane.compile; eager calls of that size take the plugin the
    rule without the file picks).

    In a distributed job (torch.distributed initialized, more than one rank) every rank
    must apply the same file, so that every rank runs the same plugin for the same call:
    the ranks compare the file's contents, and a rank whose file differs raises ValueError
    naming the ranks that disagree (on every rank, before anything is applied). A rank
    waits for the others at most BACKPLANE_SELECTION_TIMEOUT seconds (default 60), then
    raises ValueError naming the ranks that did not come; a rank coming later raises too.

    Raises ValueError naming the file, line and column for one that is not a selection
    file, and naming the file for one that cannot be read (only a regular file is read,
    never a FIFO or a device); TypeError for a path that is not str or os.PathLike of str.
    Returns the path in force."""
    before = _inductor_buckets()
    if path is None:
        applied = core().apply_selection("")
        _warn_if_compiled_code_keeps_its_choice(before)
        return applied["selection_file"]
    path = _selection_path(path)
    _require_same_file_on_every_rank(path)
    import torch

    from .selection_environment import devices_for

    applied = core().apply_selection(os.path.abspath(path), strict, torch.__version__, devices_for(path))
    for message in applied["warnings"]:
        warnings.warn(message, stacklevel=2)
    _warn_if_compiled_code_keeps_its_choice(before)
    return applied["selection_file"]


def _inductor_buckets() -> str:
    """The rules of the file in force that name `inductor`, as text (compared before and after)."""
    rules = [r for r in core().serving()["rules"] if any(b["plugin"] == "inductor" for b in r["buckets"])]
    return repr(sorted(repr(r) for r in rules))


def _warn_if_compiled_code_keeps_its_choice(before: str) -> None:
    """An `inductor` choice is made while compiling: code compiled already keeps it (Dynamo's
    guards do not see the file) until it recompiles. Said where that is so."""
    from .compile import resolutions

    if _inductor_buckets() != before and resolutions():
        warnings.warn("backplane: the selection file's `inductor` buckets changed, and functions compiled "
                      "before keep the choice they were compiled with until they recompile "
                      "(torch._dynamo.reset()); plugin buckets apply at once", stacklevel=3)


def _selection_path(path) -> str:
    # The C interface takes a NUL-terminated string: "a.yaml\0b" would arrive as "a.yaml".
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"selection file {path!r}: expected a path (str or os.PathLike), found "
                        f"{type(path).__name__}") from None
    if not isinstance(path, str):
        raise TypeError(f"selection file {path!r}: expected a path as str or os.PathLike, found bytes "
                        "(os.fsdecode gives the str)")
    if "\x00" in path:
        raise ValueError(f"selection file {path!r}: the path holds a NUL character")
    return path


def _require_same_file_on_every_rank(path: str) -> None:
    import sys

    dist = sys.modules.get("torch.distributed")  # never imported for this: a job that uses it has
    if dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return
    digests = exchange_with_deadline(dist, "selection", _digest(path), f"selection file {path}",
                                     "compare selection files")
    if len(set(digests)) > 1:
        groups: dict[str, list[int]] = {}
        for rank, d in enumerate(digests):
            groups.setdefault(d, []).append(rank)
        seen = "; ".join(f"ranks {ranks}: {d[:12] if not d.startswith('unreadable') else d}"
                         for d, ranks in groups.items())
        raise ValueError(f"selection file {path}: the ranks of this job read different files ({seen}); every rank "
                         "must apply the same file, or ranks would run different plugins for the same call")


# The core reads at most this much of a selection file (kMaxTextFileBytes in
# core/src/plugins/posix_files.h), so a larger one is refused there whatever its digest.
_MAX_FILE_BYTES = 16 << 20


def _digest(path: str) -> str:
    """The file's SHA-256, or "unreadable (why)". Read as the core reads it: opened without
    blocking and read only when a regular file (a FIFO would block for good, /dev/zero
    never end), at most _MAX_FILE_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        return f"unreadable ({e.strerror})"
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "unreadable (not a regular file)"
        data = f.read(_MAX_FILE_BYTES + 1)
    if len(data) > _MAX_FILE_BYTES:
        return f"unreadable (more than {_MAX_FILE_BYTES >> 20} MiB)"
    return hashlib.sha256(data).hexdigest()
