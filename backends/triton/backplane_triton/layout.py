"""How a kernel addresses its operands: merged dimensions, row layouts, index width.

Every kernel here reads inputs in place through their strides (no copies) while the
layout, after merging, has at most MAX_ROW_DIMS leading dimensions; beyond that the
caller makes a copy (each kernel module says which).
"""
import functools

import torch
import triton.language as tl

# Leading ("row") dimensions a kernel decomposes a row index into (row_index.row_offset).
MAX_ROW_DIMS = 3
INT32_MAX = 2**31 - 1


def next_power_of_2(n):
    """As triton.next_power_of_2, without its constexpr wrapper (microseconds a call, on
    the host path of every launch)."""
    return 1 << (n - 1).bit_length() if n > 1 else 1


def cdiv(a, b):
    return -(-a // b)


def acc_type(dtype):
    """The type kernels compute in: float64 for float64, float32 for the others."""
    return tl.float64 if dtype == torch.float64 else tl.float32


def merge_dims(sizes, strides):
    """Drops size-1 dimensions and merges neighbours contiguous in every operand.

    sizes: the shared sizes, outer to inner; strides: one list per operand. Returns
    (sizes, strides) in the same form, with no size-1 dimension."""
    merged_sizes, merged_strides = [], [[] for _ in strides]
    for d, size in enumerate(sizes):
        if size == 1:
            continue
        if merged_sizes and all(s[-1] == st[d] * size for s, st in zip(merged_strides, strides)):
            merged_sizes[-1] *= size
            for s, st in zip(merged_strides, strides):
                s[-1] = st[d]
            continue
        merged_sizes.append(size)
        for s, st in zip(merged_strides, strides):
            s.append(st[d])
    return merged_sizes, merged_strides


def is_dense(t):
    """True when t's elements fill its memory exactly, in some order of its dimensions (a
    contiguous tensor, or a permutation of one)."""
    expected = 1
    for stride, size in sorted((stride, size) for size, stride in zip(t.shape, t.stride()) if size != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def padded_rows(sizes, strides):
    """Row dimensions (at most MAX_ROW_DIMS, outer to inner) padded at the outer end to
    exactly MAX_ROW_DIMS: (sizes, strides per operand, how many are real, at least 1)."""
    pad = MAX_ROW_DIMS - len(sizes)
    return [1] * pad + list(sizes), [[0] * pad + list(s) for s in strides], max(1, len(sizes))


def row_layout(leading, tensors):
    """The joint row layout of `tensors` over the leading sizes `leading` (each tensor's
    strides over them: expanded ones have zeros), or None if more than MAX_ROW_DIMS
    dimensions are left after merging."""
    sizes, strides = merge_dims(list(leading), [list(t.stride())[:len(leading)] for t in tensors])
    if len(sizes) > MAX_ROW_DIMS:
        return None
    return padded_rows(sizes, strides)


def needs_int64(*tensors):
    """True when an element offset of some tensor (from its own strides) or an element
    count may not fit 32-bit indices."""
    for t in tensors:
        extent = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
        if extent >= INT32_MAX // 2 or t.numel() >= INT32_MAX // 2:
            return True
    return False


@functools.lru_cache(maxsize=None)
def _sm_count(index):
    return torch.cuda.get_device_properties(index).multi_processor_count


def multiprocessors(t):
    """The multiprocessors of t's device; 1 off CUDA (the interpreter's CPU tensors)."""
    return _sm_count(t.device.index) if t.is_cuda else 1
