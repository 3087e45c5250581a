"""Whether this machine's Triton interpreter (TRITON_INTERPRET=1) can run the Triton
plugin's row kernels, which loop over a bound passed as a kernel argument. Triton 3.6's
interpreter reads such a bound with int() of a one-element NumPy array, an error in NumPy
2.4.6 and 2.5.2 (the GPU machine has Triton 3.6.0 and NumPy 2.5.2); Triton 3.8 (CI's, with
NumPy 2.4.6) runs it. Tests that run those kernels interpreted skip where it cannot, naming
the versions and the error; the GPU tests (tests/python/cuda/test_cuda_triton_*.py) check
the kernels there."""
from __future__ import annotations

import functools
import os
import subprocess
import sys

# Run with TRITON_INTERPRET=1: prints "" where the loop runs right, else why not.
PROBE = r'''
import numpy, torch, triton, triton.language as tl

@triton.jit
def looped(out, n, BLOCK: tl.constexpr):
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        total += 1.0
    tl.store(out + tl.arange(0, BLOCK), total)

out = torch.empty(4)
try:
    looped[(1,)](out, 8, BLOCK=4)
    print("" if out.tolist() == [2.0] * 4 else f"Triton {triton.__version__}'s interpreter ran a loop wrongly: {out}")
except Exception as e:
    print(f"Triton {triton.__version__}'s interpreter cannot run a loop bounded by a kernel argument with NumPy "
          f"{numpy.__version__} ({type(e).__name__}: {e}); the Triton plugin's kernels are checked on the GPU here "
          "instead (tests/python/cuda/test_cuda_triton_*.py)")
'''


def _has_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def fault_in_this_process() -> str:
    """The probe in this process, which must already interpret (TRITON_INTERPRET=1); ""
    where triton is not installed (the tests that need it skip for that, by name)."""
    import contextlib
    import io

    assert os.environ.get("TRITON_INTERPRET") == "1", "the probe runs under the interpreter"
    if not _has_triton():
        return ""
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        exec(compile(PROBE, "<triton interpreter probe>", "exec"), {"__name__": "triton_interpreter_probe"})
    return text.getvalue().strip()


@functools.lru_cache(maxsize=None)
def fault() -> str:
    """The probe in a child process under the interpreter ("" where triton is not
    installed: the tests that need it skip for that, by name)."""
    if not _has_triton():
        return ""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    if done.returncode:
        return f"the Triton interpreter probe failed: {done.stderr.strip()[-500:]}"
    return done.stdout.strip()
