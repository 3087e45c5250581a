"""silu_mul: silu(gate) * up = gate / (1 + exp(-gate)) * up, with broadcasting, in opmath
(float32; float64 for float64), rounded once. gate and up may be the two halves of one
[..., 2H] projection (strided views): read in place (elementwise.py).
float32's exp and division are the hardware's approximations (a few ulp, as Inductor's
sigmoid): IEEE division doubled the registers of the bfloat16 kernel, whose instruction
count then nears its memory time on an H200."""
import triton
import triton.language as tl

from .. import elementwise
from .._registry import kernel


@triton.jit
def _silu_mul(gate, up, unused, p):
    return gate / (1.0 + tl.exp(-gate)) * up, gate


@kernel("silu_mul")
def silu_mul(out, gate, up):
    elementwise.launch(_silu_mul, [out], [gate, up])
