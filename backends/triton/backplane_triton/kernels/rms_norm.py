"""rms_norm: y = x / sqrt(mean(x^2 over the last dimension) + eps) * weight, summed in
float32 (float64 for float64), each y rounded once from (x * r) * w as the CUDA plugin.

Two kernels, a program per BLOCK_M rows (rows.py's configurations, tuned per shape):
- register rows (rows up to 16384 elements, 8192 for float64; not column-major): the
  program loads its rows whole, sums squares, scales and stores: x is read once.
- looped rows (longer rows; or transposed x, in 32 x 64 tiles that read it coalesced):
  two passes over the row in chunks, the second mostly from cache.
x may be any view (rows.py); weight any 1-D view (stride 0 included); y is contiguous.
"""
import triton
import triton.language as tl

from .._registry import kernel
from ..opmath import inv_rms
from ..row_index import load_rows, tile_rows
from ..rows import Rows, block_launcher, run_planned

_MAX_REGISTER_ROW = 16384


@triton.jit
def _register_rows_kernel(y, x, w, R, N, d1, d2, t0, t1, t2, xs, ws, eps: "fp64", ACC: tl.constexpr,
                          ROW_DIMS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          INT64: tl.constexpr):
    rows = tile_rows(tl.program_id(0), BLOCK_M, INT64)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    mask = (rows < R)[:, None] & cmask[None, :]
    xv = load_rows(x, rows, cols, mask, d1, d2, t0, t1, t2, xs, ROW_DIMS, 0.0, ACC)
    wv = tl.load(w + cols * ws, mask=cmask, other=0.0).to(ACC)
    inv = inv_rms(tl.sum(xv * xv, axis=1), N, eps)
    tl.store(y + rows[:, None] * N + cols[None, :], xv * inv[:, None] * wv[None, :], mask=mask)


@triton.jit
def _looped_rows_kernel(y, x, w, R, N, d1, d2, t0, t1, t2, xs, ws, eps: "fp64", ACC: tl.constexpr,
                        ROW_DIMS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        INT64: tl.constexpr):
    rows = tile_rows(tl.program_id(0), BLOCK_M, INT64)
    rmask = (rows < R)[:, None]
    squares = tl.zeros([BLOCK_M, BLOCK_N], ACC)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        xv = load_rows(x, rows, cols, rmask & (cols < N)[None, :], d1, d2, t0, t1, t2, xs, ROW_DIMS, 0.0, ACC)
        squares += xv * xv
    inv = inv_rms(tl.sum(squares, axis=1), N, eps)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        cmask = cols < N
        mask = rmask & cmask[None, :]
        xv = load_rows(x, rows, cols, mask, d1, d2, t0, t1, t2, xs, ROW_DIMS, 0.0, ACC)
        wv = tl.load(w + cols * ws, mask=cmask, other=0.0).to(ACC)
        tl.store(y + rows[:, None] * N + cols[None, :], xv * inv[:, None] * wv[None, :], mask=mask)


def _build(out, inputs, tail):
    x, weight = inputs
    n = x.shape[-1]
    rows = Rows([x])
    scalars = (rows.count, n, rows.sizes[1], rows.sizes[2], *rows.strides_of(0), weight.stride(0))
    launcher, constants, settled = block_launcher(
        "rms_norm", (_register_rows_kernel, _looped_rows_kernel), rows, n, (out, rows.inputs[0], weight), scalars,
        tail, _MAX_REGISTER_ROW, also=(out, weight))

    def plan(out, inputs, tail):
        x, weight = inputs
        launcher(out, *rows.apply([x]), weight, *scalars, *tail, **constants)

    return plan, settled


@kernel("rms_norm")
def rms_norm(out, x, weight, eps=1e-6):
    if out.numel() == 0:
        return
    run_planned("rms_norm", out, (x, weight), (float(eps),), _build)
