"""mul: a * b with broadcasting, in opmath (float32; float64 for float64), rounded once.
Layouts: elementwise.py (read in place, any view)."""
import triton
import triton.language as tl  # noqa: F401 - the interpreter needs it in every jit function's globals

from .. import elementwise
from .._registry import kernel


@triton.jit
def _mul(a, b, unused, p):
    return a * b, a


@kernel("mul")
def mul(out, a, b):
    elementwise.launch(_mul, [out], [a, b])
