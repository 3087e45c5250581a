"""softmax_backward over the last dimension: y * (grad - sum(grad * y)), in float32
(float64 for float64), rounded once.

Two kernels, a program per BLOCK_M rows (rows.py's configurations, tuned per shape):
- register rows (up to 16384 elements, neither input column-major): grad's and y's rows
  loaded whole, the dot product, then the result stored: each read once.
- looped rows (longer rows; or a transposed input, in 32 x 64 tiles): the dot product in
  one pass, the write in a second: two reads of each.
Zero-dim inputs are one row of one element. grad and y may be any views (rows.py); the
output is contiguous.
Not done: splitting a few long rows over several programs (the CUDA plugin's split rows).
"""
import triton
import triton.language as tl

from .._registry import kernel
from ..row_index import load_rows, tile_rows
from ..rows import Rows, block_launcher, run_planned

_MAX_REGISTER_ROW = 16384


@triton.jit
def _register_rows_kernel(out, g, y, R, N, d1, d2, g0, g1, g2, gs, y0, y1, y2, ys, ACC: tl.constexpr,
                          ROW_DIMS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          INT64: tl.constexpr):
    rows = tile_rows(tl.program_id(0), BLOCK_M, INT64)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < R)[:, None] & (cols < N)[None, :]
    gv = load_rows(g, rows, cols, mask, d1, d2, g0, g1, g2, gs, ROW_DIMS, 0.0, ACC)
    yv = load_rows(y, rows, cols, mask, d1, d2, y0, y1, y2, ys, ROW_DIMS, 0.0, ACC)
    dot = tl.sum(gv * yv, axis=1)
    tl.store(out + rows[:, None] * N + cols[None, :], yv * (gv - dot[:, None]), mask=mask)


@triton.jit
def _looped_rows_kernel(out, g, y, R, N, d1, d2, g0, g1, g2, gs, y0, y1, y2, ys, ACC: tl.constexpr,
                        ROW_DIMS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        INT64: tl.constexpr):
    rows = tile_rows(tl.program_id(0), BLOCK_M, INT64)
    rmask = (rows < R)[:, None]
    dots = tl.zeros([BLOCK_M, BLOCK_N], ACC)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = rmask & (cols < N)[None, :]
        dots += load_rows(g, rows, cols, mask, d1, d2, g0, g1, g2, gs, ROW_DIMS, 0.0, ACC) * \
            load_rows(y, rows, cols, mask, d1, d2, y0, y1, y2, ys, ROW_DIMS, 0.0, ACC)
    dot = tl.sum(dots, axis=1)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = rmask & (cols < N)[None, :]
        gv = load_rows(g, rows, cols, mask, d1, d2, g0, g1, g2, gs, ROW_DIMS, 0.0, ACC)
        yv = load_rows(y, rows, cols, mask, d1, d2, y0, y1, y2, ys, ROW_DIMS, 0.0, ACC)
        tl.store(out + rows[:, None] * N + cols[None, :], yv * (gv - dot[:, None]), mask=mask)


def _build(out, inputs, tail):
    grad, y = inputs
    if y.dim() == 0:  # one row of one element
        grad, y, out = grad.view(1), y.view(1), out.view(1)
    n = y.shape[-1]
    rows = Rows([grad, y])
    scalars = (rows.count, n, rows.sizes[1], rows.sizes[2], *rows.strides_of(0), *rows.strides_of(1))
    launcher, constants, settled = block_launcher(
        "softmax_backward", (_register_rows_kernel, _looped_rows_kernel), rows, n, (out, *rows.inputs), scalars,
        tail, _MAX_REGISTER_ROW, max_warps=32, also=(out,))

    def plan(out, inputs, tail):
        launcher(out, *rows.apply(inputs), *scalars, **constants)

    return plan, settled


@kernel("softmax_backward")
def softmax_backward(out, grad, y):
    if out.numel() == 0:
        return
    run_planned("softmax_backward", out, (grad, y), (), _build)
