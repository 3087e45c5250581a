"""A fresh Python for a test's child program without paying torch's import each time.

Most child programs the suite runs (conftest.run_python) begin by importing torch: 2-3
CPU-seconds each on the CI machine, a third or more of all the CPU time the suite's child
processes use (bench/results/test-times.md). Each pytest worker keeps one "warm" server
instead: a Python started as run_python would start it, which has run `import torch` and
nothing else, and forks once per program. The forked process sets the program's
environment, working directory, argv, sys.path[0] and output files, then runs the program
as `__main__` and ends as a fresh interpreter would (atexit, exit status, a signal's
death), so the test sees a CompletedProcess as from subprocess.run.

What a fork cannot give is whatever torch's import read from the environment or the
command line, so a call runs through subprocess.run instead (as before) when it passes
interpreter flags or a preexec_fn, when its environment differs from the server's in a
variable torch's import or Python's start may read (_READ_AT_START: PYTHONPATH,
LD_PRELOAD, OMP_NUM_THREADS, TORCH_*, for example), or while another thread's program
runs on the server. BACKPLANE_FRESH_PYTHON=1 sends every call there, for comparing;
BACKPLANE_WARM_PYTHON_LOG=FILE appends a line per call saying which way it ran.

Limits: `sys.orig_argv` is the server's; stdin is /dev/null (a new interpreter inherits
the worker's); modules torch imports (numpy among them) are already imported when the
program starts, as they would be after its own `import torch`; output goes to files, so
a process the program leaves running does not hold the call up as an open pipe would.
"""
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# Variables torch's import (or Python's start) may read, which a program must not set
# differently from the server's. Any other variable is read later: by the program, backplane,
# Inductor (TORCHINDUCTOR_*, AOTI_*), Triton (TRITON_*) or CUDA's first use
# (CUDA_VISIBLE_DEVICES); the server asserts that its import left Inductor and Triton
# unimported, and it never initializes CUDA.
_READ_AT_START = ("PYTHON", "LD_", "LANG", "LC_", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "NPY_", "NUMPY_",
                  "TORCH_", "PYTORCH_", "KINETO_", "NVIDIA_", "CUDA_")
_READ_LATER = ("CUDA_VISIBLE_DEVICES",)

# The server: reads a request a line, forks, runs the program in the child, answers with
# the child's pid and then its exit status. `import torch` is the only thing it does first.
_SERVER = r"""
import json, os, sys
import torch
assert not {"torch._inductor", "triton"} & set(sys.modules), "torch's import brought in Inductor or Triton"
requests, answers = os.fdopen(os.dup(0), "r"), os.fdopen(os.dup(1), "w")
for line in requests:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        break
    answers.write(json.dumps({"pid": pid}) + "\n"); answers.flush()
    answers.write(json.dumps({"status": os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}) + "\n"); answers.flush()
else:
    sys.exit(0)
# The program's process from here.
requests.close(); answers.close()
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0); os.close(null)
for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
    f = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.dup2(f, fd); os.close(f)
os.chdir(request["cwd"])
os.environ.clear(); os.environ.update(request["env"])
program = request["program"]
sys.argv = [program if program is not None else "-c", *request["args"]]
sys.path[0] = os.path.dirname(os.path.realpath(program)) if program is not None else ""
import types
main = types.ModuleType("__main__")  # `python -c` defines no __file__
if program is not None:
    main.__file__ = program
sys.modules["__main__"] = main  # multiprocessing's spawn finds the program from here
source = open(program).read() if program is not None else request["code"]
exec(compile(source, program or "<string>", "exec"), main.__dict__)
"""


class _Server:
    def __init__(self, env: dict):
        self.env = env
        self.lock = threading.Lock()
        self.pending = b""  # answer bytes read but not yet taken (_answer)
        self.process = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=env, text=True, bufsize=1)

    def alive(self) -> bool:
        return self.process.poll() is None

    def differs(self, env: dict) -> list[str]:
        """The variables in which `env` differs from the server's and a fork cannot honour."""
        keys = {k for k in set(env) | set(self.env) if env.get(k) != self.env.get(k)}
        return sorted(k for k in keys if k.startswith(_READ_AT_START) and k not in _READ_LATER)

    def _answer(self, timeout: float | None) -> dict | None:
        """The server's next answer line, or None when none came within `timeout` seconds.
        Read through a buffer of our own: the pid and the status of a quick program can come
        in one read, and select() does not see a line already buffered."""
        end = None if timeout is None else time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self.pending:
            if end is not None and not select.select([fd], [], [], max(0.0, end - time.monotonic()))[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the warm Python server ended (status {self.process.poll()})")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, program, code, args, env, cwd, timeout, command):
        """The finished process, or None while another thread's program is running here:
        one server runs one program at a time, and programs a test starts together (two
        ranks of one job) must run together."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            return self._run(program, code, args, env, cwd, timeout, command)
        finally:
            self.lock.release()

    def _run(self, program, code, args, env, cwd, timeout, command):
        with tempfile.TemporaryDirectory(prefix="warm-python-") as folder:
            stdout, stderr = Path(folder, "stdout"), Path(folder, "stderr")
            stdout.touch(); stderr.touch()
            self.process.stdin.write(json.dumps({
                "program": program, "code": code, "args": args, "env": env, "cwd": cwd,
                "stdout": str(stdout), "stderr": str(stderr)}) + "\n")
            self.process.stdin.flush()
            pid = self._answer(None)["pid"]
            answer = self._answer(timeout)
            if answer is None:  # as subprocess.run: kill it, then raise
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    os.kill(pid, signal.SIGKILL)
                self._answer(None)
            out, err = stdout.read_text(errors="replace"), stderr.read_text(errors="replace")
            if answer is None:
                raise subprocess.TimeoutExpired(command, timeout, out, err)
            return subprocess.CompletedProcess(command, answer["status"], out, err)


_server: _Server | None = None


def _said(what: str, done=None):
    """Appends how a call ran to $BACKPLANE_WARM_PYTHON_LOG, where set (for counting); returns `done`."""
    if log := os.environ.get("BACKPLANE_WARM_PYTHON_LOG"):
        with open(log, "a") as f:
            f.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}\t{what}\n")
    return done


def run(program: str | Path, args: list[str], env: dict, base_env: dict, cwd, timeout: float, flags: tuple,
        preexec_fn, command: list[str]) -> subprocess.CompletedProcess | None:
    """The program's finished process, run from the warm server, which starts (once) in
    `base_env`; None where it must run through subprocess.run instead (see the module's text)."""
    global _server
    if flags or preexec_fn is not None or os.environ.get("BACKPLANE_FRESH_PYTHON") == "1":
        return _said("fresh: flags, preexec_fn or BACKPLANE_FRESH_PYTHON")
    if _server is None or not _server.alive():
        _server = _Server(base_env)
    if differs := _server.differs(env):
        return _said(f"fresh: {', '.join(differs)} differ")
    is_file = isinstance(program, Path)
    done = _server.run(str(program) if is_file else None, None if is_file else program, list(args), env,
                       str(cwd) if cwd is not None else os.getcwd(), timeout, command)
    return _said("fresh: the server is running another thread's program") if done is None else _said("forked", done)
