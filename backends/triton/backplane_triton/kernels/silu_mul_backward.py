"""silu_mul_backward: with s = sigmoid(gate), dgate = grad * up * s * (1 + gate * (1 - s))
and dup = grad * gate * s, at the broadcast shape of grad, gate and up, in opmath (float32;
float64 for float64), each rounded once: one pass, three inputs read and two outputs
written per element (elementwise.py; the outputs share one layout). float32's exp and
division are the hardware's approximations, as in silu_mul."""
import triton
import triton.language as tl

from .. import elementwise
from .._registry import kernel


@triton.jit
def _silu_mul_backward(grad, gate, up, p):
    s = 1.0 / (1.0 + tl.exp(-gate))
    return grad * up * s * (1.0 + gate * (1.0 - s)), grad * gate * s


@kernel("silu_mul_backward")
def silu_mul_backward(dgate, dup, grad, gate, up):
    elementwise.launch(_silu_mul_backward, [dgate, dup], [grad, gate, up])
