"""@triton.jit arithmetic the kernels share, rounded as the CUDA plugin rounds it."""
import triton
import triton.language as tl


@triton.jit
def divide(a, b):
    """a / b rounded as IEEE division (float32's default `/` is an approximation); b is a
    tensor, a may be a literal."""
    if b.dtype == tl.float64:
        q = a / b
    else:
        q = tl.div_rn(a, b)
    return q


@triton.jit
def inv_rms(sum_squares, n, eps):
    """1 / sqrt(sum_squares / n + eps), IEEE-rounded as the CUDA plugin's inv_rms."""
    mean = divide(sum_squares, tl.cast(n, sum_squares.dtype)) + tl.cast(eps, sum_squares.dtype)
    if mean.dtype == tl.float64:
        r = 1.0 / tl.sqrt(mean)
    else:
        r = tl.div_rn(1.0, tl.sqrt_rn(mean))
    return r


@triton.jit
def add_pairs(a0, b0, a1, b1):
    """The combining function of two sums taken in one tl.reduce."""
    return a0 + a1, b0 + b1
