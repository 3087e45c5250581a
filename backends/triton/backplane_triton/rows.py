"""What the row ops (rms_norm, softmax, their backwards, rotary) share on the host side:
the joint row layout of their inputs, launch configurations, plans cached per layout.

Row r of an output is at r * n (outputs are contiguous; rotary's may have x's strides);
row r of an input is found from its leading strides (row_index.row_offset), so padded,
sliced, offset, expanded and permuted leading dimensions are read in place. Where the inputs' leading dimensions merge
to more than MAX_ROW_DIMS, inputs are copied (contiguous()) first: a limit.
"""
import collections
import functools
import math

import torch

from . import tuning
from .launch import grid_call, tracing
from .layout import acc_type, cdiv, needs_int64, next_power_of_2, row_layout

# A launch configuration: BLOCK_M rows x BLOCK_N elements a tile, warps a program; for
# kernels whose programs loop over row tiles (rms_norm_backward), per_sm programs a
# multiprocessor and the software-pipelining stages of that loop.
Config = collections.namedtuple("Config", "block_m block_n warps per_sm stages", defaults=(0, 1))


class Rows:
    """The rows of `inputs`, each broadcast to the first one's leading sizes (expanded
    dimensions of stride 0). If their leading dimensions merge to more than MAX_ROW_DIMS,
    inputs are copied (contiguous, before expanding) one by one, in order, until they fit."""

    def __init__(self, inputs):
        leading = tuple(inputs[0].shape[:-1])
        originals = list(inputs)

        def expanded():
            return [t.expand(*leading, t.shape[-1]) for t in originals]

        layout = row_layout(leading, expanded())
        self.copied = 0  # how many of the inputs, from the first, are copied
        while layout is None:
            originals[self.copied] = originals[self.copied].contiguous()
            self.copied += 1
            layout = row_layout(leading, expanded())
        self.inputs = expanded()
        self.sizes, self.strides, self.dims = layout
        self.count = math.prod(leading)

    def apply(self, inputs):
        """Another call's inputs of this layout, copied as these were (kernel arguments:
        only their addresses are read, so they need no expanding)."""
        return [t.contiguous() if i < self.copied else t for i, t in enumerate(inputs)]

    def strides_of(self, i):
        """The row strides (3) and the stride along a row of input i: kernel arguments."""
        return [*self.strides[i], self.inputs[i].stride(-1)]

    def column_major(self, i):
        """True where input i's rows are one unit-stride dimension and its elements along a
        row are not: a transposed input, read coalesced only by tiles of many rows."""
        return self.dims == 1 and self.strides[i][-1] == 1 and self.inputs[i].stride(-1) != 1

    def int64(self, *others):
        return needs_int64(*self.inputs, *others)

    def key(self):
        """What a tuned choice depends on besides the op, dtype and row length."""
        column_major = tuple(self.column_major(i) for i in range(len(self.inputs)))
        unit = tuple(t.stride(-1) == 1 for t in self.inputs)
        return str(self.inputs[0].device), next_power_of_2(max(self.count, 1)), self.dims, column_major, unit


@functools.lru_cache(maxsize=1024)
def register_row_configs(n, rows, max_tile, max_warps=16):
    """(BLOCK_M, BLOCK_N, warps) for kernels that hold BLOCK_M whole rows in registers, the
    best guess first: short rows several a program (tiles of about 2048 elements), about
    16 elements a thread; then neighbours of the guess for the tuner, in tiles of at most
    max_tile elements (two rows of 32768 spilled, compiled for sm_90)."""
    block_n = next_power_of_2(n)
    block_m = max(1, min(next_power_of_2(rows), 2048 // block_n))
    warps = max(1, min(max_warps, block_m * block_n // 512))
    guesses = [(block_m, warps), (block_m, warps * 2), (block_m, max(1, warps // 2)), (block_m * 2, warps * 2)]
    configs = []
    for bm, w in guesses:
        config = Config(bm, block_n, min(w, 32))
        if bm <= next_power_of_2(rows) and bm * block_n <= max(max_tile, block_n) and config not in configs:
            configs.append(config)
    return tuple(configs)


@functools.lru_cache(maxsize=None)
def looped_row_configs(n, column_major, dtype):
    """(BLOCK_M, BLOCK_N, warps) for kernels that loop over a row in chunks: long rows a
    chunk of 4096 (or 8192) elements, half that for float64 (whose opmath values take two
    registers); column-major rows tiles of 32 rows x 64 columns, which read each column's
    neighbouring rows coalesced."""
    if column_major:
        return Config(32, 64, 4), Config(64, 64, 8), Config(16, 128, 4)
    configs = Config(1, 4096, 8), Config(1, 8192, 16), Config(2, 2048, 8)
    if dtype == torch.float64:
        configs = tuple(Config(c.block_m, c.block_n // 2, c.warps) for c in configs)
    return configs


def register_row_limit(elements, dtype):
    """The longest row a register kernel takes: `elements` (for float32 opmath), half that
    for float64."""
    return elements // 2 if dtype == torch.float64 else elements


def choose_kernel(rows, n, max_row, max_warps=16):
    """(looped, configurations) of a row op whose register kernel takes rows of up to
    max_row elements (float32 opmath): the looped kernel for longer rows and for
    column-major inputs."""
    dtype = rows.inputs[0].dtype
    column_major = any(rows.column_major(i) for i in range(len(rows.inputs)))
    limit = register_row_limit(max_row, dtype)
    if column_major or n > limit:
        return True, looped_row_configs(n, column_major, dtype)
    return False, register_row_configs(n, rows.count, limit, max_warps)


def block_launcher(op, kernels, rows, n, tensors, scalars, tail, max_row, max_warps=16, also=()):
    """(launcher, constants, settled) for a row op's register kernel (kernels[0]) or looped
    kernel (kernels[1]), a program per BLOCK_M rows: launcher(*tensors, *scalars, *tail,
    **constants) runs it, in the configuration tuning picks (timing the candidates on
    this call's tensors and tail when it tunes); constants are ACC, ROW_DIMS, BLOCK_M,
    BLOCK_N, INT64 (for offsets of the rows' inputs and of the tensors in `also`) and
    num_warps; settled: the tuner's choice is final."""
    dtype = rows.inputs[0].dtype
    looped, configs = choose_kernel(rows, n, max_row, max_warps)
    kernel_fn = kernels[looped]
    int64 = rows.int64(*also)

    def launcher(c):
        return grid_call(kernel_fn, (cdiv(rows.count, c.block_m),)), dict(
            ACC=acc_type(dtype), ROW_DIMS=rows.dims, BLOCK_M=c.block_m, BLOCK_N=c.block_n, INT64=int64,
            num_warps=c.warps)

    def run(c):
        k, constants = launcher(c)
        k(*tensors, *scalars, *tail, **constants)

    key = (op, dtype, n, looped, rows.key())
    return (*launcher(tuning.pick(key, configs, run)), tuning.settled(key, configs))


_plans = {}
_MAX_PLANS = 4096


def run_planned(op, out, inputs, tail, build, out_like_first=False):
    """Runs a row op: out (contiguous, as the core allocates it; else a temporary copied
    into out; with out_like_first, an out with the first input's strides is the op's to
    write too), its tensor arguments `inputs` and per-call scalars `tail` (eps). The launch
    comes from a plan cached per layout (op, dtype, device, every tensor's sizes and
    strides), so a repeated call skips the layout work and the tuner's lookup (tens of
    microseconds of Python). build(out, inputs, tail) -> (plan, settled), plan(out, inputs,
    tail) launching; settled: the tuner's choice is final, so the plan may be kept."""
    if not out.is_contiguous() and not (out_like_first and out.stride() == inputs[0].stride()):
        temp = out.new_empty(out.shape)
        run_planned(op, temp, inputs, tail, build)
        out.copy_(temp)
        return
    if tracing():  # a plan holds eager launchers (launch.py): build one for this trace, keep none
        build(out, inputs, tail)[0](out, inputs, tail)
        return
    key = (op, out.dtype, out.device, out.shape, out.stride(), *((t.shape, t.stride()) for t in inputs))
    plan = _plans.get(key)
    if plan is None:
        plan, settled = build(out, inputs, tail)
        if settled and len(_plans) < _MAX_PLANS:
            _plans[key] = plan
    plan(out, inputs, tail)
