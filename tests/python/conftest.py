import contextlib
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# Under pytest-xdist each worker gets an Inductor cache of its own (and so do the
# processes it starts): two workers compiling the same kernel into one shared cache race
# on its kernel_metadata.json, and a package built meanwhile holds an empty one that
# aoti_load_package cannot parse (seen with 2 workers on the CPU machine).
if "PYTEST_XDIST_WORKER" in os.environ and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = f"{default_cache_dir()}_{os.environ['PYTEST_XDIST_WORKER']}"

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import backplane  # noqa: E402
import warm_python  # noqa: E402
from suite_timeline import pytest_runtest_protocol  # noqa: E402,F401  (a hook: BACKPLANE_TEST_TIMELINE)

# The variables that choose plugins and their kernels. A child process a test starts gets
# the test's own choice, not that of the shell that ran pytest.
SELECTION_VARIABLES = ("BACKPLANE_BACKENDS", "BACKPLANE_PREFER", "BACKPLANE_SELECTION")


def child_env(**extra) -> dict:
    """This process's environment without SELECTION_VARIABLES, then `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in SELECTION_VARIABLES}
    env.update(extra)
    return env


def run_python(program: str | Path, *args, env: dict | None = None, unset: tuple = (), timeout: float = 300,
               cwd=None, flags: tuple = (), preexec_fn=None) -> subprocess.CompletedProcess:
    """Runs `program` (a program's text, or the Path of a program file) in a fresh Python,
    `args` as its sys.argv[1:], and returns the finished process with its output as text.
    The child imports this checkout's backplane (PYTHONPATH), gets child_env() without the
    variables in `unset`, then `env`; `flags` go to the interpreter (-W ignore), and
    `preexec_fn` to subprocess.run (to set a resource limit in the child). A fresh
    process is how a test loads plugins, crashes or hangs without touching this session."""
    base = child_env(PYTHONPATH=str(REPO / "python"))
    environ = {k: v for k, v in base.items() if k not in unset}
    environ.update(env or {})
    source = [str(program)] if isinstance(program, Path) else ["-c", program]
    command = [sys.executable, *flags, *source, *map(str, args)]
    # Forked from a server that has imported torch once, where that is the same as a fresh
    # start (tests/python/warm_python.py); else a new interpreter.
    done = warm_python.run(program, [str(a) for a in args], environ, base, cwd, timeout, flags, preexec_fn, command)
    if done is not None:
        return done
    return subprocess.run(command, capture_output=True, text=True, env=environ, timeout=timeout, cwd=cwd,
                          preexec_fn=preexec_fn)


@contextlib.contextmanager
def made_once_per_run(tmp_path_factory, name):
    """Yields (folder, made): a folder shared by every pytest-xdist worker of this run, and
    whether something already made it. The first worker to ask makes what the folder
    holds while the others wait on a file lock, then they reuse it: each AOTInductor
    package (about a minute each on the GPU machine) is compiled once per run, whatever
    pytest and xdist versions (xdist's --dist loadgroup groups do nothing under pytest 9,
    which the GPU machine has). The maker writes `done` in the folder last."""
    root = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        root = root.parent  # the run's folder, above each worker's own
    folder = root / f"shared-{name}"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder.mkdir(exist_ok=True)
        made = (folder / "done").exists()
        yield folder, made
        (folder / "done").touch()


@pytest.fixture(scope="session", autouse=True)
def cpu_backend():
    backplane.load("cpu")


@pytest.fixture(scope="session", autouse=True)
def inductor_cxx():
    """AOTInductor packages compiled in this session use a C++ compiler that links
    libstdc++ dynamically, as the pipeline's do: the GPU machine's default CXX links it
    statically, and such a package crashes the process that loads it (load_package now
    refuses one; docs/aoti-findings.md)."""
    from torch._inductor import config

    from backplane.aoti.libstdcxx import choose_cxx

    with config.patch({"cpp.cxx": (None, choose_cxx(None))}):
        yield


class Plain(torch.nn.Module):
    """Plain aten ops whose output depends on where each element sits: read with the
    wrong strides, the package returns other numbers."""

    def forward(self, x, y):
        return x * 2 + y[:, None, None, :]  # exact in any order of evaluation


@pytest.fixture(scope="session")
def plain_package(tmp_path_factory):
    """(path, layouts) of one AOTInductor package of `Plain` (x: (batch, 3, 4, 5), y: (batch, 5),
    batch 2..1024) with Backplane's layout record; compiled once per run (tens of seconds)."""
    from backplane.aoti.layouts import add_layouts, read_layouts

    with made_once_per_run(tmp_path_factory, "plain") as (folder, made):
        path = folder / "plain.pt2"
        if made:
            return path, read_layouts(path)
        batch = torch.export.Dim("batch", min=2, max=1024)
        ep = torch.export.export(Plain(), (torch.randn(3, 3, 4, 5), torch.randn(3, 5)),
                                 dynamic_shapes=({0: batch}, {0: batch}))
        torch._inductor.aoti_compile_and_package(ep, package_path=str(path))
        return path, add_layouts(path, ep)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: a test of half a minute or more (an AOTInductor, Inductor or Triton "
        "compile); under pytest-xdist they start first, dealt round the workers")


def _first_test_of_each_worker(count: int, workers: int) -> list[int]:
    """The index each worker's tests start at: pytest-xdist's worksteal scheduler hands
    each worker, in turn, an equal share of what is left, in collection order."""
    starts, position = [], 0
    for i in range(workers):
        starts.append(position)
        position += (count - position) // (workers - i)
    return starts


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the tests marked slow go to the heads of different workers'
    shares, dealt round: each share's first test is a slow one while any is left, then its
    second, and so on. Left in file order, several landed at the head of one worker's
    share, which ran them one after another while the others had finished (work stealing
    takes from the tail of a share). The order is the same on every worker, as xdist
    requires."""
    workers = getattr(config, "workerinput", {}).get("workercount") or 0
    slow = [item for item in items if item.get_closest_marker("slow")]
    if workers < 2 or not slow or len(items) < 2 * workers:
        return
    fast = [item for item in items if not item.get_closest_marker("slow")]
    starts = _first_test_of_each_worker(len(items), workers)
    ends = starts[1:] + [len(items)]
    heads = []  # positions for the slow tests: every share's first, then every share's second, ...
    depth = 0
    while len(heads) < len(slow):
        heads += [start + depth for start, end in zip(starts, ends) if start + depth < end]
        depth += 1
    heads = set(heads[:len(slow)])
    slow_left, fast_left = iter(slow), iter(fast)
    items[:] = [next(slow_left) if position in heads else next(fast_left) for position in range(len(items))]
