"""rotary: Llama's half rotation. With x = [x1, x2] (the halves of the last dimension D),
y = [x1 * cos - x2 * sin, x2 * cos + x1 * sin], in float32 (float64 for float64), rounded
once; cos and sin ([..., S, D/2]) broadcast to x's leading dimensions.

One kernel: a program per BLOCK_M rows of x (a row: D/2 pairs) x all pairs of the row;
each thread loads x1, x2, cos and sin of its pairs, then stores both halves: x read once,
y written once. Rows are found from each operand's leading strides, jointly merged
(rows.py), so x may be q or k sliced from a fused qkv tensor with its heads transposed
([B, S, 3, H, D] viewed as [B, H, S, D]: three leading dimensions) and cos/sin may be
expanded or sliced caches, all read in place. Leading dimensions that merge to more than
three: x, then cos and sin, copied (contiguous) first. y is contiguous, or laid out as x
(the core does so for a dense permuted x: registry `layout: x`), then written at x's own
offsets; a y laid out as x that was copied goes through a contiguous temporary.
"""
import torch
import triton
import triton.language as tl

from .. import tuning
from .._registry import kernel
from ..launch import grid_call
from ..layout import acc_type, cdiv, next_power_of_2
from ..row_index import row_offset, tile_rows
from ..rows import Config, Rows, run_planned

_TILE_PAIRS = 2048


@triton.jit
def _rotary_kernel(y, x, cos, sin, R, HALF, d1, d2, x0, x1, x2, xs, c0, c1, c2, cs, s0, s1, s2, ss,
                   ACC: tl.constexpr, ROW_DIMS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr,
                   INT64: tl.constexpr, Y_LIKE_X: tl.constexpr):
    rows = tile_rows(tl.program_id(0), BLOCK_M, INT64)
    pairs = tl.arange(0, BLOCK_H)
    mask = (rows < R)[:, None] & (pairs < HALF)[None, :]
    first = x + row_offset(rows, d1, d2, x0, x1, x2, ROW_DIMS)[:, None] + pairs[None, :] * xs
    a = tl.load(first, mask=mask).to(ACC)
    b = tl.load(first + HALF * xs, mask=mask).to(ACC)
    c = tl.load(cos + row_offset(rows, d1, d2, c0, c1, c2, ROW_DIMS)[:, None] + pairs[None, :] * cs,
                mask=mask).to(ACC)
    s = tl.load(sin + row_offset(rows, d1, d2, s0, s1, s2, ROW_DIMS)[:, None] + pairs[None, :] * ss,
                mask=mask).to(ACC)
    if Y_LIKE_X:  # y has x's strides: x's offsets from y's start
        out = y + row_offset(rows, d1, d2, x0, x1, x2, ROW_DIMS)[:, None] + pairs[None, :] * xs
        second_half = HALF * xs
    else:
        out = y + rows[:, None] * (2 * HALF) + pairs[None, :]
        second_half = HALF
    tl.store(out, a * c - b * s, mask=mask)
    tl.store(out + second_half, b * c + a * s, mask=mask)


def _configs(half, rows):
    """(BLOCK_M, BLOCK_H, warps): tiles of about 2048 pairs (16 a thread at 4 warps), the
    best guess first."""
    block_h = next_power_of_2(half)
    block_m = max(1, min(next_power_of_2(rows), _TILE_PAIRS // block_h))
    configs = [Config(block_m, block_h, 4), Config(block_m, block_h, 8), Config(block_m * 2, block_h, 8),
               Config(max(1, block_m // 2), block_h, 4)]
    return [c for i, c in enumerate(configs) if c not in configs[:i] and c.block_m <= next_power_of_2(rows)]


def _build(out, inputs, tail):
    x = inputs[0]
    half = x.shape[-1] // 2
    rows = Rows(list(inputs))
    if not out.is_contiguous() and rows.copied:  # x was copied: its offsets are not y's
        contiguous, settled = _build(torch.empty_like(out, memory_format=torch.contiguous_format), inputs, tail)

        def through_temporary(out, inputs, tail):
            temp = torch.empty_like(out, memory_format=torch.contiguous_format)
            contiguous(temp, inputs, tail)
            out.copy_(temp)

        return through_temporary, settled
    y_like_x = not out.is_contiguous()
    configs = _configs(half, rows.count)
    scalars = (rows.count, half, rows.sizes[1], rows.sizes[2], *rows.strides_of(0), *rows.strides_of(1),
               *rows.strides_of(2))
    int64 = rows.int64(out)

    def launcher(c):
        return grid_call(_rotary_kernel, (cdiv(rows.count, c.block_m),)), dict(
            ACC=acc_type(x.dtype), ROW_DIMS=rows.dims, BLOCK_M=c.block_m, BLOCK_H=c.block_n, INT64=int64,
            Y_LIKE_X=y_like_x, num_warps=c.warps)

    def run(c):
        k, constants = launcher(c)
        k(out, *rows.inputs, *scalars, **constants)

    key = ("rotary", x.dtype, half, rows.key(), y_like_x)
    k, constants = launcher(tuning.pick(key, configs, run))

    def plan(out, inputs, tail):
        k(out, *rows.apply(inputs), *scalars, **constants)

    return plan, tuning.settled(key, configs)


@kernel("rotary")
def rotary(out, x, cos, sin):
    if out.numel() == 0:
        return
    run_planned("rotary", out, (x, cos, sin), (), _build, out_like_first=True)
