"""The elementwise engine of add, mul, silu_mul and silu_mul_backward.

An op gives a @triton.jit function FN(x0, x1, x2, p) -> (r0, r1) in opmath (float32, or
float64 for float64): up to three inputs, a scalar parameter (add's alpha), one or two
results. `launch` lays the operands out as the CUDA plugin's engine does: each input
expanded to the output's sizes (broadcast dimensions of stride 0), dimensions ordered by
the first output's strides (the core may give a dense permuted output), size-1 ones
dropped, neighbours contiguous in every operand merged. Then:
- dense: one unit-stride run in every operand (an input may be a single broadcast
  value): flat tiles, 16 KiB of each operand a program, unmasked (vectorized) except in
  the last tile.
- strided: up to 1 + MAX_ROW_DIMS merged dimensions, any strides: 2-D tiles of rows x
  the innermost dimension; a tile of 64 x 64 where an operand is column-major against the
  output (a transposed input), which the compiler reads coalesced and transposes on chip.
- more dimensions: inputs copied to the output's layout first, then dense (a limit).
"""
import math

import triton
import triton.language as tl

from .layout import (MAX_ROW_DIMS, acc_type, cdiv, is_dense, merge_dims, multiprocessors, needs_int64,
                     next_power_of_2, padded_rows)
from .bind_function import bind_function
from .launch import grid_call, tracing
from .row_index import row_offset

# Bytes of each operand a dense program takes: 4 x 16-byte vectors a thread at 8 warps
# (half that for three inputs and two outputs: 16 KiB spilled silu_mul_backward's
# bfloat16 registers, compiled for sm_90).
_DENSE_TILE_BYTES = 16384
_DENSE_WARPS = 8
_MIN_DENSE_BLOCK = 1024
# Elements of a strided program's tile: as dense where every innermost stride is 0 or 1
# (vector loads), else 2048 (an address a element).
_STRIDED_TILE = 2048
_TRANSPOSE_SIDE = 64


@triton.jit
def _load_dense(ptr, offs, mask, BROADCAST: tl.constexpr, MASKED: tl.constexpr, ACC: tl.constexpr):
    if BROADCAST:
        v = tl.broadcast_to(tl.load(ptr), offs.shape)
    elif MASKED:
        v = tl.load(ptr + offs, mask=mask)
    else:
        v = tl.load(ptr + offs)
    return v.to(ACC)


@triton.jit
def _dense_tile(o0, o1, i0, i1, i2, offs, mask, p, ACC: tl.constexpr, TWO: tl.constexpr,
                B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr, MASKED: tl.constexpr):
    x0 = _load_dense(i0, offs, mask, B0, MASKED, ACC)
    x1 = _load_dense(i1, offs, mask, B1, MASKED, ACC)
    if TWO:
        x2 = _load_dense(i2, offs, mask, B2, MASKED, ACC)
    else:
        x2 = x1
    r0, r1 = FN(x0, x1, x2, p)
    if MASKED:
        tl.store(o0 + offs, r0, mask=mask)
        if TWO:
            tl.store(o1 + offs, r1, mask=mask)
    else:
        tl.store(o0 + offs, r0)
        if TWO:
            tl.store(o1 + offs, r1)


@triton.jit
def _dense_kernel(o0, o1, i0, i1, i2, n, p: "fp64", ACC: tl.constexpr, TWO: tl.constexpr,
                  B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr, BLOCK: tl.constexpr,
                  INT64: tl.constexpr):
    pid = tl.program_id(0)
    if INT64:
        start = pid.to(tl.int64) * BLOCK
    else:
        start = pid * BLOCK
    offs = start + tl.arange(0, BLOCK)
    pa = tl.cast(p, ACC)
    if start + BLOCK <= n:
        _dense_tile(o0, o1, i0, i1, i2, offs, offs < n, pa, ACC, TWO, B0, B1, B2, False)
    else:
        _dense_tile(o0, o1, i0, i1, i2, offs, offs < n, pa, ACC, TWO, B0, B1, B2, True)


@triton.jit
def _tile_offsets(rows, cols, d1, d2, t0, t1, t2, tc, ROW_DIMS: tl.constexpr):
    return row_offset(rows, d1, d2, t0, t1, t2, ROW_DIMS)[:, None] + cols[None, :] * tc


@triton.jit
def _strided_kernel(o0, o1, i0, i1, i2, R, C, d1, d2,
                    o0_t0, o0_t1, o0_t2, o0_tc, o1_t0, o1_t1, o1_t2, o1_tc,
                    i0_t0, i0_t1, i0_t2, i0_tc, i1_t0, i1_t1, i1_t2, i1_tc, i2_t0, i2_t1, i2_t2, i2_tc,
                    col_tiles, p: "fp64", ACC: tl.constexpr, TWO: tl.constexpr,
                    ROW_DIMS: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, INT64: tl.constexpr):
    pid = tl.program_id(0)
    rows = (pid // col_tiles) * BR + tl.arange(0, BR)
    cols = (pid % col_tiles) * BC + tl.arange(0, BC)
    if INT64:
        rows = rows.to(tl.int64)
        cols = cols.to(tl.int64)
    mask = (rows < R)[:, None] & (cols < C)[None, :]
    x0 = tl.load(i0 + _tile_offsets(rows, cols, d1, d2, i0_t0, i0_t1, i0_t2, i0_tc, ROW_DIMS), mask=mask).to(ACC)
    x1 = tl.load(i1 + _tile_offsets(rows, cols, d1, d2, i1_t0, i1_t1, i1_t2, i1_tc, ROW_DIMS), mask=mask).to(ACC)
    if TWO:
        x2 = tl.load(i2 + _tile_offsets(rows, cols, d1, d2, i2_t0, i2_t1, i2_t2, i2_tc, ROW_DIMS),
                     mask=mask).to(ACC)
    else:
        x2 = x1
    r0, r1 = FN(x0, x1, x2, tl.cast(p, ACC))
    tl.store(o0 + _tile_offsets(rows, cols, d1, d2, o0_t0, o0_t1, o0_t2, o0_tc, ROW_DIMS), r0, mask=mask)
    if TWO:
        tl.store(o1 + _tile_offsets(rows, cols, d1, d2, o1_t0, o1_t1, o1_t2, o1_tc, ROW_DIMS), r1, mask=mask)


class _Bound:
    """The engine's kernels with one op's FN called by name (bind_function.py: why)."""

    def __init__(self, fn):
        self.dense = bind_function([_dense_tile, _dense_kernel], fn)["_dense_kernel"]
        self.strided = bind_function([_strided_kernel], fn)["_strided_kernel"]


_bound = {}


def bound_kernels(fn) -> _Bound:
    if fn not in _bound:
        _bound[fn] = _Bound(fn)
    return _bound[fn]


# Launch plans by layout: (FN, dtype, device, each operand's sizes and strides) -> a
# function of (outs, ins, p) that launches with everything but the pointers worked out,
# so a repeated call skips the layout work (tens of microseconds of Python).
_plans = {}
_MAX_PLANS = 4096


def launch(fn, outs, ins, p=0.0):
    """Runs FN over the broadcast of `ins` into `outs` (one or two outputs of one shape;
    two outputs need three inputs)."""
    if tracing():  # a plan holds eager launchers (launch.py): build one for this trace, keep none
        _plan(fn, outs, ins)(outs, ins, p)
        return
    key = (fn, outs[0].dtype, outs[0].device, *((t.shape, t.stride()) for t in outs), None,
           *((t.shape, t.stride()) for t in ins))
    plan = _plans.get(key)
    if plan is None:
        plan = _plan(fn, outs, ins)
        if len(_plans) < _MAX_PLANS:
            _plans[key] = plan
    plan(outs, ins, p)


def _plan(fn, outs, ins):
    out = outs[0]
    if out.numel() == 0:
        return lambda outs, ins, p: None
    expanded = [t.expand(out.shape) for t in ins]
    order = sorted(range(out.dim()), key=lambda d: -out.stride(d))
    sizes, strides = merge_dims([out.shape[d] for d in order],
                                [[t.stride(d) for d in order] for t in list(outs) + expanded])
    if len(sizes) <= 1 and all(s == [1] or not s for s in strides[:len(outs)]) \
            and all(not s or s[0] in (0, 1) for s in strides[len(outs):]):
        return _dense_plan(fn, outs, expanded, [bool(s) and s[0] == 0 for s in strides[len(outs):]])
    if len(sizes) <= 1 + MAX_ROW_DIMS:
        return _strided_plan(fn, outs, expanded, sizes, strides)
    return lambda outs, ins, p: _launch_relaid(fn, outs, ins, p)


def _tile_elements(out, two):
    return _DENSE_TILE_BYTES // (2 if two else 1) // out.element_size()


def _warps(elements, out):
    return _DENSE_WARPS if elements * out.element_size() >= 8192 else 4


def _dense_plan(fn, outs, ins, broadcast):
    out, n, two = outs[0], outs[0].numel(), len(outs) == 2
    block = _tile_elements(out, two)
    # Small inputs: smaller tiles, so that every multiprocessor gets some (interpreter: 1).
    sms = multiprocessors(out)
    while block > _MIN_DENSE_BLOCK and cdiv(n, block) < 2 * sms:
        block //= 2
    b = broadcast + [False] * (3 - len(broadcast))
    launcher = grid_call(bound_kernels(fn).dense, (cdiv(n, block),))
    constants = dict(ACC=acc_type(out.dtype), TWO=two, B0=b[0], B1=b[1], B2=b[2], BLOCK=block,
                     INT64=needs_int64(*outs, *ins), num_warps=_warps(block, out))
    if two:
        return lambda outs, ins, p: launcher(outs[0], outs[1], ins[0], ins[1], ins[2], n, p, **constants)
    return lambda outs, ins, p: launcher(outs[0], outs[0], ins[0], ins[1], ins[1], n, p, **constants)


def _strided_plan(fn, outs, ins, sizes, strides):
    out, two = outs[0], len(outs) == 2
    cols = sizes[-1] if sizes else 1
    row_sizes, row_strides, row_dims = padded_rows(sizes[:-1], [s[:-1] for s in strides])
    inner = [s[-1] if s else 0 for s in strides]
    rows = math.prod(row_sizes)
    transposed = row_dims == 1 and any(rs[-1] == 1 and c != 1 for rs, c in zip(row_strides, inner))
    if transposed:
        bc = br = _TRANSPOSE_SIDE
        warps = 8
    else:
        vectors = all(c in (0, 1) for c in inner)
        tile = _tile_elements(out, two) if vectors else _STRIDED_TILE
        bc = min(next_power_of_2(cols), tile)
        br = max(1, min(next_power_of_2(rows), tile // bc))
        warps = _warps(br * bc, out)
    per_operand = [[*rs, c] for rs, c in zip(row_strides, inner)]
    if not two:  # unused operand slots: the first output's strides, never read or written
        per_operand.insert(1, per_operand[0])
        per_operand.append(per_operand[-1])
    col_tiles = cdiv(cols, bc)
    launcher = grid_call(bound_kernels(fn).strided, (col_tiles * cdiv(rows, br),))
    scalars = (rows, cols, row_sizes[1], row_sizes[2], *[s for operand in per_operand for s in operand], col_tiles)
    constants = dict(ACC=acc_type(out.dtype), TWO=two, ROW_DIMS=row_dims, BR=br, BC=bc,
                     INT64=needs_int64(*outs, *ins), num_warps=warps)
    if two:
        return lambda outs, ins, p: launcher(outs[0], outs[1], ins[0], ins[1], ins[2], *scalars, p, **constants)
    return lambda outs, ins, p: launcher(outs[0], outs[0], ins[0], ins[1], ins[1], *scalars, p, **constants)


def _launch_relaid(fn, outs, ins, p):
    """More merged dimensions than the strided kernel takes: inputs copied into the first
    output's layout (dense outputs, as the core allocates them), or, for outputs of any
    other layout, the whole op computed into dense temporaries and copied back."""
    out = outs[0]
    if is_dense(out) and all(o.stride() == out.stride() for o in outs):
        relaid = [out.new_empty_strided(out.shape, out.stride()).copy_(t.expand(out.shape))
                  for t in ins]
        launch(fn, outs, relaid, p)
        return
    temps = [o.new_empty(o.shape) for o in outs]
    launch(fn, temps, ins, p)
    for o, t in zip(outs, temps):
        o.copy_(t)
