"""softmax over the last dimension: exp(x - max) * (1 / sum(exp(x - max))), in float32
(float64 for float64), rounded once.

Two kernels, a program per BLOCK_M rows (rows.py's configurations, tuned per shape):
- register rows (up to 32768 elements, a 32000-word vocabulary row included; not
  column-major): rows loaded whole, max, sum of exp, then exp scaled and stored: x read once.
- looped rows (longer rows; or transposed x, in 32 x 64 tiles): one pass keeps a running
  maximum and a sum rescaled to it (online softmax), a second writes: two reads of x.
A row of -inf gives NaN, as PyTorch's. A zero-dim x is one row of one element. x may be
any view (rows.py); y is contiguous.
Not done: splitting a few long rows over several programs (the CUDA plugin's split rows
for 32 x 32000): there a program per row leaves multiprocessors idle.
"""
import triton
import triton.language as tl

from .._registry import kernel
from ..opmath import divide
from ..row_index import load_rows, tile_rows
from ..rows import Rows, block_launcher, run_planned

_MAX_REGISTER_ROW = 32768
_NEG_INF = tl.constexpr(-float("inf"))


@triton.jit
def _register_rows_kernel(y, x, R, N, d1, d2, t0, t1, t2, xs, ACC: tl.constexpr, ROW_DIMS: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, INT64: tl.constexpr):
    rows = tile_rows(tl.program_id(0), BLOCK_M, INT64)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < R)[:, None] & (cols < N)[None, :]
    xv = load_rows(x, rows, cols, mask, d1, d2, t0, t1, t2, xs, ROW_DIMS, _NEG_INF, ACC)
    e = tl.exp(xv - tl.max(xv, axis=1)[:, None])
    inv = divide(1.0, tl.sum(e, axis=1))
    tl.store(y + rows[:, None] * N + cols[None, :], e * inv[:, None], mask=mask)


@triton.jit
def _looped_rows_kernel(y, x, R, N, d1, d2, t0, t1, t2, xs, ACC: tl.constexpr, ROW_DIMS: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, INT64: tl.constexpr):
    rows = tile_rows(tl.program_id(0), BLOCK_M, INT64)
    rmask = (rows < R)[:, None]
    # Per lane (row, column of the chunk): running maximum and sum of exp relative to it.
    m = tl.full([BLOCK_M, BLOCK_N], _NEG_INF, ACC)
    s = tl.zeros([BLOCK_M, BLOCK_N], ACC)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        xv = load_rows(x, rows, cols, rmask & (cols < N)[None, :], d1, d2, t0, t1, t2, xs, ROW_DIMS, _NEG_INF, ACC)
        m_new = tl.maximum(m, xv)
        # Lanes still at -inf (padding, or -inf so far) add nothing: exp(-inf - 0) = 0.
        base = tl.where(m_new == _NEG_INF, 0.0, m_new)
        s = s * tl.exp(m - base) + tl.exp(xv - base)
        m = m_new
    row_max = tl.max(m, axis=1)
    base = tl.where(row_max == _NEG_INF, 0.0, row_max)
    inv = divide(1.0, tl.sum(s * tl.exp(m - base[:, None]), axis=1))
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = rmask & (cols < N)[None, :]
        xv = load_rows(x, rows, cols, mask, d1, d2, t0, t1, t2, xs, ROW_DIMS, _NEG_INF, ACC)
        tl.store(y + rows[:, None] * N + cols[None, :], tl.exp(xv - row_max[:, None]) * inv[:, None], mask=mask)


def _build(out, inputs, tail):
    (x,) = inputs
    if x.dim() == 0:  # one row of one element
        x, out = x.view(1), out.view(1)
    n = x.shape[-1]
    rows = Rows([x])
    scalars = (rows.count, n, rows.sizes[1], rows.sizes[2], *rows.strides_of(0))
    launcher, constants, settled = block_launcher(
        "softmax", (_register_rows_kernel, _looped_rows_kernel), rows, n, (out, rows.inputs[0]), scalars, tail,
        _MAX_REGISTER_ROW, max_warps=32, also=(out,))

    def plan(out, inputs, tail):
        launcher(out, *rows.apply(inputs), *scalars, **constants)

    return plan, settled


@kernel("softmax")
def softmax(out, x):
    if out.numel() == 0:
        return
    run_planned("softmax", out, (x,), (), _build)
