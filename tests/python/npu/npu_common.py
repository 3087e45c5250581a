"""What the npu test files (test_npu_*.py) share. Importing it loads the npu plugin; pytest
runs these files in a process of their own (scripts/test.sh: a registered PrivateUse1
device becomes torch's accelerator, which the CUDA tests must not see)."""
from pathlib import Path

import pytest
import torch

import backplane
from conftest import run_python

backplane.load("npu")
ROOT = Path(__file__).resolve().parents[3]

# The fallback's once-per-op warnings are the feature under test in test_npu_fallback.py;
# elsewhere they would only repeat. Each file's pytestmark.
QUIET_FALLBACK = pytest.mark.filterwarnings("ignore:backplane npu:UserWarning")


def same(got, expected):
    """got (on the device) holds exactly expected's values."""
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def run_alone(program, timeout=120):
    """Runs program in a fresh process with npu loaded, a crash there failing one test, not the
    suite: a program's text (npu loaded first), or the Path of a file that loads npu itself."""
    if not isinstance(program, Path):
        program = "import torch, backplane; backplane.load('npu')\n" + program
    return run_python(program, flags=("-W", "ignore"), timeout=timeout)
