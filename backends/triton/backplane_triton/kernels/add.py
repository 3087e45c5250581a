"""add: a + alpha * b with broadcasting, in opmath (float32; float64 for float64), rounded
once. alpha reaches the kernel as a double and is rounded to opmath there, as the CUDA
plugin's alpha.to<opmath_t>(). Layouts: elementwise.py (read in place, any view)."""
import triton
import triton.language as tl  # noqa: F401 - the interpreter needs it in every jit function's globals

from .. import elementwise
from .._registry import kernel


@triton.jit
def _add(a, b, unused, alpha):
    return a + alpha * b, a


@kernel("add")
def add(out, a, b, alpha=1):
    elementwise.launch(_add, [out], [a, b], float(alpha))
