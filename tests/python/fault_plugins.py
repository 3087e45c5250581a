"""Fixture plugins that fail while opening (tests/fixtures/faults: init_throws, init_aborts,
init_exits), copied under other names, and one that never finishes opening: what the
loading and selection tests point the loader at."""
import os
import shutil
import subprocess
from pathlib import Path

BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", Path(__file__).resolve().parents[2] / "build" / "bin" / "backplane"))
FAULTS = BACKPLANE.parent.parent / "tests" / "fixtures" / "faults"
HANG = "#include <unistd.h>\nnamespace { const int hung = (pause(), 0); }  // never returns from dlopen\n"


def plugin_copy(folder: Path, fault: str, name: str | None = None) -> Path:
    """The fixture plugin init_<fault> (throws, aborts, exits) copied into `folder` as
    libbackplane_<name>.so with its manifest renamed to match."""
    name = name or f"init_{fault}"
    folder.mkdir(exist_ok=True)
    shutil.copy(FAULTS / f"libbackplane_init_{fault}.so", folder / f"libbackplane_{name}.so")
    manifest = (FAULTS / f"libbackplane_init_{fault}.manifest.yaml").read_text()
    (folder / f"libbackplane_{name}.manifest.yaml").write_text(manifest.replace(f"init_{fault}", name))
    return folder / f"libbackplane_{name}.so"


def hanging_plugin(folder: Path) -> None:
    """libbackplane_init_hangs.so: its static initializer never returns. One small C++ file,
    no torch headers; the manifest is init_exits's, renamed."""
    plugin_copy(folder, "exits", "init_hangs")
    (folder / "hang.cpp").write_text(HANG)
    cxx = os.environ.get("CXX", "c++")
    subprocess.run([cxx, "-shared", "-fPIC", "-o", str(folder / "libbackplane_init_hangs.so"), str(folder / "hang.cpp")],
                   check=True, timeout=120)
