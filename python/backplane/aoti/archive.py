"""The one reader (and appender) of .pt2 archives: every entry name is checked before any
entry is read, and Backplane's own records lie under the archive's one top folder
(`<archive>/extra/backplane_inputs.txt`, `<archive>/extra/backplane_plugins.txt`)."""
from __future__ import annotations

import collections
import functools
import json
import os
import zipfile


def check_entries(path: str | os.PathLike) -> list[str]:
    """The archive's entry names; raises ValueError naming an entry that would be extracted
    outside the extraction folder (absolute, `..`, or a drive/backslash path: zip-slip), or
    one that the archive holds more than once (which of them a reader takes differs:
    zipfile the last, miniz either; two readers would see two packages)."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    for name, count in collections.Counter(names).items():
        if count > 1:
            raise ValueError(f"{path}: refusing the package: it holds {count} entries named {name!r}")
    for name in names:
        parts = name.replace("\\", "/").split("/")
        if name.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            raise ValueError(f"{path}: refusing the package: its entry {name!r} would be written outside the "
                             "extraction folder")
    return names


class Archive:
    """A .pt2 archive whose entry names have been checked (check_entries)."""

    def __init__(self, path: str | os.PathLike):
        self.path = path
        self.names = check_entries(path)

    @functools.cached_property
    def prefix(self) -> str:
        """The one top folder every entry lies in, with its '/'."""
        tops = {n.split("/", 1)[0] for n in self.names}
        if len(tops) != 1:
            raise ValueError(f"{self.path}: expected every entry under one folder, found {sorted(tops)[:5]}")
        return tops.pop() + "/"

    def entry(self, record: str) -> str:
        """The full name of a record such as "extra/backplane_inputs.txt"."""
        return self.prefix + record

    def read(self, name: str) -> bytes:
        """An entry's bytes, by its full name (one of `names`)."""
        with zipfile.ZipFile(self.path) as z:
            return z.read(name)

    def device(self) -> str:
        """The device the package was compiled for (its AOTI_DEVICE_KEY: "cpu", "cuda", "npu"),
        read from the wrapper's metadata; "" when the package names none."""
        for name in self.names:
            if name.endswith("wrapper_metadata.json") and "/data/aotinductor/" in name:
                return str(json.loads(self.read(name)).get("AOTI_DEVICE_KEY", ""))
        return ""

    def read_record(self, record: str) -> bytes | None:
        """A record's bytes, or None for an archive without it."""
        name = self.entry(record)
        return self.read(name) if name in self.names else None

    def add_record(self, record: str, text: str) -> None:
        """Appends a record as a stored entry (torch's and Backplane's readers both see it);
        raises ValueError when the archive holds it already."""
        name = self.entry(record)
        if name in self.names:
            raise ValueError(f"{self.path}: already holds {name}")
        with zipfile.ZipFile(self.path, "a", compression=zipfile.ZIP_STORED) as z:
            z.writestr(name, text)
        self.names.append(name)
