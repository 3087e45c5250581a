"""The Triton plugin's tests run its kernels under Triton's interpreter, on CPU tensors:
TRITON_INTERPRET must be set before any kernel module is imported (its @triton.jit
decorators read it), and backends/triton must be importable."""
import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "backends" / "triton"))
