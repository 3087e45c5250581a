"""The selection file `backplane tune` writes (python/backplane/bench/tune.py decides what it
says): its text, with every string quoted, and its writing, which never leaves the file it
replaces half-written. `--out` is checked before any timing (check_out); the text goes to
a temporary file beside it, which the core's own reader reads back, and only then is it
renamed over the old one (write).

Limits: a symbolic link as --out is followed (the file it names is replaced, the link is
kept); the rename is atomic within one file system, which a file beside the target shares.
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import warnings

import backplane


class OutError(ValueError):
    """--out cannot be written, or what was written was refused; the message names the file."""


def text_of(value) -> str:
    """`value` as text that encodes as UTF-8 whatever it holds: the undecodable bytes of a
    file name (Python keeps them as surrogate escapes, in sys.argv too) as \\xNN, any
    other lone surrogate (a JSON string may hold one) as \\udNNN."""
    text = "" if value is None else str(value)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _escaped(value) -> str:
    """text_of(value) with '"', '\\' and every unprintable character (controls, line
    breaks, format characters) as YAML's double-quoted escapes: one line, read back as is."""
    out = []
    for c in text_of(value):
        if c in '"\\':
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        else:
            n = ord(c)
            out.append(f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")
    return "".join(out)


def quoted(value) -> str:
    """A YAML double-quoted scalar: a string the reader takes as a string, never as null,
    a boolean or a number (`null`, `on`, `1e3` unquoted are not strings)."""
    return f'"{_escaped(value)}"'


def _flow(mapping: dict) -> str:
    """{k: v, ...} in YAML's flow style: strings quoted, numbers plain, mappings nested."""
    def value(v):
        if isinstance(v, dict):
            return _flow(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return quoted(v)
        return str(int(v)) if isinstance(v, int) else repr(float(v))
    return "{" + ", ".join(f"{_key(k)}: {value(v)}" for k, v in mapping.items()) + "}"


# Words YAML 1.1 reads as null or a boolean: a key spelled so is quoted, as any other text is.
_YAML_WORDS = {"null", "true", "false", "yes", "no", "on", "off", "y", "n"}


def _key(name) -> str:
    """A mapping key: plain where it is a lower-case word YAML reads as text, else quoted."""
    text = str(name)
    plain = text.isascii() and text.isidentifier() and text.islower() and text not in _YAML_WORDS
    return text if plain else quoted(text)


def _environment_lines(environment: dict) -> list[str]:
    """`environment:` (docs/selection.md): torch, then lists of flow mappings (devices, plugins)."""
    lines = ["environment:"]
    for key, value in environment.items():
        if isinstance(value, (list, tuple)):
            lines.append(f"  {key}:" + ("" if value else " []"))
            lines += [f"    - {_flow(item)}" for item in value]
        else:
            lines.append(f"  {key}: {quoted(value)}")
    return lines


def selection_yaml(entries: list[dict], made_by: dict, left_out: list[str] = (), notes: list[str] = (),
                   environment: dict | None = None) -> str:
    """The selection file's text. Written by hand, not by a YAML library: every string is
    quoted, every number a plain integer or float, and the layout stays the one people
    read. `left_out`: the sizes the run did not decide, and `notes`: how some were
    decided, as comments; `environment`: the process's (selection_environment.current()).
    An entry may carry `dtype` and `mode`; a bucket's `measured` is optional."""
    lines = ["# Which plugin serves each op, by the element count of the call's largest Tensor argument.",
             "# Written by `backplane tune`; apply with backplane.load(..., selection=FILE), BACKPLANE_SELECTION=FILE",
             "# or `backplane --selection FILE`. The format: core/include/backplane/selection_file.h."]
    lines += [f"# Not decided: {_escaped(note)}" for note in left_out]
    lines += [f"# Note: {_escaped(note)}" for note in notes]
    lines += ["backplane_selection: 1",
              "made_by: {" + ", ".join(f"{k}: {quoted(v)}" for k, v in made_by.items()) + "}"]
    if environment is not None:
        lines += _environment_lines(environment)
    lines.append("ops:" if entries else "ops: []")
    for e in entries:
        lines += [f"  - op: {quoted(e['op'])}", f"    dispatch_key: {quoted(e['dispatch_key'])}"]
        lines += [f"    {k}: {quoted(e[k])}" for k in ("dtype", "mode") if e.get(k)]
        lines.append("    buckets:")
        for b in e["buckets"]:
            head = f"up_to: {int(b['up_to'])}, " if "up_to" in b else ""
            if "measured" not in b:
                lines.append(f"      - {{{head}plugin: {quoted(b['plugin'])}}}")
                continue
            lines.append(f"      - {{{head}plugin: {quoted(b['plugin'])}, measured: [")
            for m in b["measured"]:
                times = ", ".join(f"{quoted(p)}: {float(t)!r}" for p, t in m["median_us"].items())
                more = "".join(f", {k}: {_flow(m[k])}" for k in ("repetitions", "p_faster") if k in m)
                lines.append(f"          {{preset: {quoted(m['preset'])}, dtype: {quoted(m['dtype'])}, "
                             f"elements: {int(m['elements'])}, median_us: {{{times}}}{more}}},")
            lines.append("        ]}")
    return "\n".join(lines) + "\n"


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


def check_out(out, keep=()) -> str:
    """The file --out will replace (symbolic links followed), refused (OutError) where it
    cannot be written, before any timing: a directory, a FIFO or device, a missing or
    unwritable directory, or one of `keep` ({flag: path}: the figures --json keeps or
    --from-json reads, which the selection would replace)."""
    shown = f"--out {_escaped(out)}"
    if not out:
        raise OutError("--out: expected the selection file's name, found ''")
    if "\x00" in out:
        raise OutError(f"{shown}: the name holds a NUL character")
    target = os.path.realpath(out)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:  # a loop of links, a folder on the way that is a file
        raise OutError(f"{shown}: {e.strerror}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise OutError(f"{shown}: is a directory; expected the selection file's name")
    if mode is not None and not stat.S_ISREG(mode):
        raise OutError(f"{shown}: is not a regular file (a FIFO or a device, say); expected the selection file's name")
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise OutError(f"{shown}: no directory {_escaped(folder)} to write it in")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutError(f"{shown}: cannot write in {_escaped(folder)} (permission denied or a read-only file system)")
    for flag, path in dict(keep).items():
        if path and _same_file(out, path):
            raise OutError(f"{shown} would replace the figures of {flag} {_escaped(path)}; write the selection "
                           "to another file")
    return target


def _mode_for(target: str) -> int:
    """The permissions of the file replaced, else those a new file gets (0666 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)  # read only by setting it; tune is one thread
        os.umask(umask)
        return 0o666 & ~umask


def _applied_quietly(path) -> None:
    """apply_selection(path) as a parse check: the plugins the file names were loaded by the
    engine's process, not necessarily by this one, so "not loaded" says nothing here, nor
    does "`inductor` buckets changed" (no function compiled here keeps a choice; compile mode
    resets Dynamo per candidate)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not loaded.*")
        warnings.filterwarnings("ignore", message=r".*`inductor` buckets changed.*")
        backplane.apply_selection(path)


def _read_back(path: str, shown: str) -> None:
    """The core's own reader on `path` (backplane.apply_selection: the C API's parser, with
    nothing else to read it without applying), then the selection in force before put back."""
    before = backplane.selection_file()
    try:
        _applied_quietly(path)
    except (ValueError, RuntimeError, backplane.BackendError) as e:
        raise OutError(f"--out {shown}: the core refuses the selection file made from these figures, so "
                       f"{shown} is left as it was: {str(e).replace(path, shown)}") from None
    finally:
        try:
            _applied_quietly(before or None)
        except (ValueError, RuntimeError, backplane.BackendError) as e:  # the old file changed meanwhile
            backplane.apply_selection(None)
            warnings.warn(f"the selection file in force before ({before}) could not be applied again after "
                          f"reading back --out {shown}, and none is in force now: {e}", RuntimeWarning)


def write(out: str, text: str) -> None:
    """`text` into --out, whole or not at all: into a temporary file beside it, read back by
    the core, then renamed over it. OutError naming --out for every failure; the file
    replaced is untouched then, and the temporary file removed."""
    target = check_out(out)  # again: the run may have taken minutes
    shown = _escaped(out)
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                                         dir=os.path.dirname(target))
    except OSError as e:
        raise OutError(f"--out {shown}: cannot write beside it: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, _mode_for(target))
        _read_back(temporary, shown)
        os.replace(temporary, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(e, OSError):
            raise OutError(f"--out {shown}: cannot write it: {e.strerror or e}") from None
        raise
