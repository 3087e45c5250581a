"""Where row r of an operand starts, for any leading strides (a @triton.jit helper)."""
import triton
import triton.language as tl


@triton.jit
def row_offset(rows, d1, d2, t0, t1, t2, ROW_DIMS: tl.constexpr):
    """Element offset of each row index in `rows` for an operand whose row dimensions
    (outer to inner: d0, d1, d2; d0 implied) have strides t0, t1, t2. With one row
    dimension there is no division, and a unit stride stays visible to the compiler
    (coalesced column-major tiles)."""
    if ROW_DIMS == 1:
        off = rows * t2
    elif ROW_DIMS == 2:
        off = (rows // d2) * t1 + (rows % d2) * t2
    else:
        q = rows // d2
        off = (q // d1) * t0 + (q % d1) * t1 + (rows % d2) * t2
    return off


@triton.jit
def tile_rows(tile, BLOCK_M: tl.constexpr, INT64: tl.constexpr):
    """The row indices of row tile `tile` (64-bit where offsets need it)."""
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    if INT64:
        rows = rows.to(tl.int64)
    return rows


@triton.jit
def load_rows(ptr, rows, cols, mask, d1, d2, t0, t1, t2, ts, ROW_DIMS: tl.constexpr, OTHER: tl.constexpr,
              ACC: tl.constexpr):
    """The [rows, cols] tile of an operand (row strides t0..t2, element stride ts) in ACC;
    OTHER where masked."""
    offsets = row_offset(rows, d1, d2, t0, t1, t2, ROW_DIMS)[:, None] + cols[None, :] * ts
    return tl.load(ptr + offsets, mask=mask, other=OTHER).to(ACC)
