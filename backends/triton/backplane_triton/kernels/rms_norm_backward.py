"""rms_norm_backward: with r = 1 / sqrt(mean(x^2) + eps) per row,
  dx = r * grad * w - x * (r^3 * mean(grad * w * x))
  dweight = sum over rows of grad * x * r
summed in float32 (float64 for float64), each output rounded once.

One pass over x and grad, then the column sums (deterministic: a fixed order):
- rows kernel: a grid of G programs (about 32 warps a multiprocessor: 4 programs of 8
  warps), program p taking row tiles p, p + G, ...; each tile's two sums in one
  reduction, dx stored, and grad * x * r added into the program's own dweight sums,
  written at the end as row p of `partial` [G, n] (opmath). Register rows (up to 8192
  elements, 4096 for float64; BLOCK_M rows a tile) hold the tile once; longer or
  column-major rows loop over chunks (two passes, the second adding into row p of
  `partial` in memory, which no other program touches). The tuner also tries half and
  twice the programs, and the next tile's loads issued one iteration early (cp.async
  into shared memory: 16 KiB a bfloat16 row of 4096).
- column sums: dweight[j] = sum over p of partial[p, j], rounded once.
No rows: dweight is zeros. x and grad may be any views (rows.py), weight any 1-D view;
dx is contiguous, dweight honours its stride.
"""
import torch
import triton
import triton.language as tl

from .. import tuning
from .._registry import kernel
from ..launch import grid_call
from ..layout import acc_type, cdiv, multiprocessors
from ..opmath import add_pairs, divide, inv_rms
from ..row_index import load_rows, tile_rows
from ..rows import Rows, choose_kernel, run_planned

_MAX_REGISTER_ROW = 8192
_RESIDENT_WARPS = 32  # a multiprocessor's warps the grid aims for (of 64 on sm_90)
_COLUMNS = 128  # dweight columns a column-sums program takes
_SUM_ROWS = 32  # partial rows it adds at a time


@triton.jit
def _register_rows_kernel(dx, partial, g, x, w, R, N, d1, d2, g0, g1, g2, gs, x0, x1, x2, xs, ws, eps: "fp64",
                          tiles, programs, ACC: tl.constexpr, ROW_DIMS: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, INT64: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    wv = tl.load(w + cols * ws, mask=cmask, other=0.0).to(ACC)[None, :]
    # Kept in the tiles' own layout, summed over its rows once at the end: a [BLOCK_N] sum
    # each tile went through shared memory (16 KiB a bfloat16 row of 4096, for sm_90).
    dw = tl.zeros([BLOCK_M, BLOCK_N], ACC)
    # STAGES 2: the next tile's x and grad are copied (cp.async) into shared memory while
    # this one is reduced and stored.
    for tile in tl.range(pid, tiles, programs, num_stages=STAGES):
        rows = tile_rows(tile, BLOCK_M, INT64)
        mask = (rows < R)[:, None] & cmask[None, :]
        xv = load_rows(x, rows, cols, mask, d1, d2, x0, x1, x2, xs, ROW_DIMS, 0.0, ACC)
        gv = load_rows(g, rows, cols, mask, d1, d2, g0, g1, g2, gs, ROW_DIMS, 0.0, ACC)
        squares, dot = tl.reduce((xv * xv, gv * wv * xv), 1, add_pairs)  # one reduction, not two
        rstd = inv_rms(squares, N, eps)
        c3 = divide(rstd * rstd * rstd * dot, tl.cast(N, ACC))
        tl.store(dx + rows[:, None] * N + cols[None, :], rstd[:, None] * gv * wv - xv * c3[:, None], mask=mask)
        dw += gv * xv * rstd[:, None]
    tl.store(partial + pid * N + cols, tl.sum(dw, axis=0), mask=cmask)


@triton.jit
def _looped_rows_kernel(dx, partial, g, x, w, R, N, d1, d2, g0, g1, g2, gs, x0, x1, x2, xs, ws, eps: "fp64",
                        tiles, programs, ACC: tl.constexpr, ROW_DIMS: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, INT64: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    own = partial + pid * N  # zeroed by the launcher
    for tile in tl.range(pid, tiles, programs, num_stages=STAGES):
        rows = tile_rows(tile, BLOCK_M, INT64)
        rmask = (rows < R)[:, None]
        squares = tl.zeros([BLOCK_M, BLOCK_N], ACC)
        dots = tl.zeros([BLOCK_M, BLOCK_N], ACC)
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            cmask = cols < N
            mask = rmask & cmask[None, :]
            xv = load_rows(x, rows, cols, mask, d1, d2, x0, x1, x2, xs, ROW_DIMS, 0.0, ACC)
            gv = load_rows(g, rows, cols, mask, d1, d2, g0, g1, g2, gs, ROW_DIMS, 0.0, ACC)
            squares += xv * xv
            dots += gv * tl.load(w + cols * ws, mask=cmask, other=0.0).to(ACC)[None, :] * xv
        rstd = inv_rms(tl.sum(squares, axis=1), N, eps)
        c3 = divide(rstd * rstd * rstd * tl.sum(dots, axis=1), tl.cast(N, ACC))
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            cmask = cols < N
            mask = rmask & cmask[None, :]
            xv = load_rows(x, rows, cols, mask, d1, d2, x0, x1, x2, xs, ROW_DIMS, 0.0, ACC)
            gv = load_rows(g, rows, cols, mask, d1, d2, g0, g1, g2, gs, ROW_DIMS, 0.0, ACC)
            wv = tl.load(w + cols * ws, mask=cmask, other=0.0).to(ACC)[None, :]
            tl.store(dx + rows[:, None] * N + cols[None, :], rstd[:, None] * gv * wv - xv * c3[:, None], mask=mask)
            sums = tl.load(own + cols, mask=cmask)
            tl.store(own + cols, sums + tl.sum(gv * xv * rstd[:, None], axis=0), mask=cmask)


@triton.jit
def _column_sums_kernel(dweight, partial, G, N, dws, ACC: tl.constexpr, BLOCK_G: tl.constexpr,
                        BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < N
    acc = tl.zeros([BLOCK_G, BLOCK_C], ACC)
    for start in range(0, G, BLOCK_G):
        p = start + tl.arange(0, BLOCK_G)
        acc += tl.load(partial + p[:, None] * N + cols[None, :], mask=(p < G)[:, None] & cmask[None, :], other=0.0)
    tl.store(dweight + cols * dws, tl.sum(acc, axis=0), mask=cmask)


def _with_grids(configs, looped):
    """The row configurations with a grid: programs a multiprocessor for about
    _RESIDENT_WARPS warps (the guess), then, for the first configuration, half and twice
    the programs and (register rows) the next tile loaded early, as it is and as two rows a
    tile on half the warps with few programs."""
    grids = []
    for i, c in enumerate(configs):
        per_sm = max(1, _RESIDENT_WARPS // c.warps)
        grids.append(c._replace(per_sm=per_sm))
        if i == 0:
            grids += [c._replace(per_sm=max(1, per_sm // 2)), c._replace(per_sm=2 * per_sm)]
            if not looped:
                # The second: fewer partial rows to sum and more loads in flight a warp; the
                # fastest of a wider sweep at bfloat16 8192x4096 on an H200
                # (experiments/triton_rms_norm_backward_sweep.py, bench/results/triton).
                grids += [c._replace(per_sm=per_sm, stages=2),
                          c._replace(block_m=2 * c.block_m, warps=max(1, c.warps // 2), per_sm=2, stages=2)]
    return list(dict.fromkeys(grids))


def _build(dx, inputs, tail):
    grad, x, weight, dweight = inputs
    n = x.shape[-1]
    rows = Rows([x, grad])
    looped, configs = choose_kernel(rows, n, _MAX_REGISTER_ROW)
    configs = _with_grids(configs, looped)
    kernel_fn = _looped_rows_kernel if looped else _register_rows_kernel
    acc = acc_type(x.dtype)
    partial_dtype = torch.float64 if acc == tl.float64 else torch.float32
    int64 = rows.int64(dx, weight)
    scalars = (rows.count, n, rows.sizes[1], rows.sizes[2], *rows.strides_of(1), *rows.strides_of(0),
               weight.stride(0))
    sums = cdiv(n, _COLUMNS)

    def launcher(c):
        tiles = cdiv(rows.count, c.block_m)
        programs = min(tiles, c.per_sm * multiprocessors(x))

        def launch(dx, grad, x, weight, dweight, eps):
            # Zeroed for the looped kernel, which adds into it.
            partial = (torch.zeros if looped else torch.empty)((programs, n), dtype=partial_dtype, device=x.device)
            grid_call(kernel_fn, (programs,))(dx, partial, grad, x, weight, *scalars, eps, tiles, programs, ACC=acc, ROW_DIMS=rows.dims,
                                   BLOCK_M=c.block_m, BLOCK_N=c.block_n, INT64=int64, STAGES=c.stages,
                                   num_warps=c.warps)
            grid_call(_column_sums_kernel, (sums,))(dweight, partial, programs, n, dweight.stride(0), ACC=acc, BLOCK_G=_SUM_ROWS,
                                         BLOCK_C=_COLUMNS, num_warps=4)

        return launch

    key = ("rms_norm_backward", x.dtype, n, looped, rows.key())
    chosen = launcher(tuning.pick(key, configs, lambda c: launcher(c)(dx, *rows.inputs[::-1], weight, dweight, *tail)))

    def plan(dx, inputs, tail):
        grad, x, weight, dweight = inputs
        chosen(dx, *rows.apply([x, grad])[::-1], weight, dweight, *tail)

    return plan, tuning.settled(key, configs)


@kernel("rms_norm_backward")
def rms_norm_backward(dx, dweight, grad, x, weight, eps=1e-6):
    if x.numel() == 0:  # no rows (or empty rows): dweight sums nothing
        dweight.zero_()
        return
    # dweight rides with the inputs: the plan's key holds its stride too.
    run_planned("rms_norm_backward", dx, (grad, x, weight, dweight), (float(eps),), _build)
