// Elementwise over a two-dimensional layout whose operands disagree on which dimension is
// unit-stride: a transposed tensor added to a contiguous one (x.t() + y). The strided
// kernel walks such a layout in the output's order, so each warp reads the other operand
// 32 elements apart; aten's TensorIterator does the same (on an H100 our strided add and
// torch.add of a transposed and a contiguous 8192 x 8192 float32 tensor read within 3% of
// each other, both below copy speed; see bench/results/). Here every operand is read and
// written along its own unit-stride dimension: a block takes a 32 x 32 tile, and each
// operand whose unit stride is the output's outer dimension ("across") passes through
// shared memory, so every warp's global access is one run of 32 adjacent elements.
//
// Taken (as_transposed_tiles) when the merged layout has exactly two dimensions, every
// operand has unit stride in one of them and a positive stride in the other (no broadcast
// dimension), and one operand at least is across. make_layout() has put the output's unit
// stride innermost, so the output itself is across only as a second output (mul_backward's
// db beside da). Limits: 2^31 - 1 tiles along the inner dimension and 65535 along the
// outer one (CUDA's grid); past that the strided kernel runs. Offsets are 64-bit.
#pragma once

#include "dependent_launch.cuh"
#include "elementwise_kernels.cuh"
#include "strided_indexing.cuh"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace backplane::cuda {

constexpr int kTileSide = 32;   // a warp's run: 32 adjacent elements
constexpr int kTileRows = 8;    // 32 x 8 threads, four rows of the tile each
constexpr int kRowsPerThread = kTileSide / kTileRows;
constexpr int64_t kMaxGridY = 65535;

template <int N>
struct TileLayout {
  int64_t size0 = 0, size1 = 0;  // the output's unit-stride dimension, then the other
  int64_t stride0[N] = {}, stride1[N] = {};
  bool across[N] = {};  // unit stride in dimension 1: staged through shared memory

  __device__ __forceinline__ int64_t offset(int k, int64_t i0, int64_t i1) const {
    return i0 * stride0[k] + i1 * stride1[k];
  }
};

// The tile layout of `layout`, or false where the tiles do not apply (see above).
template <int N>
bool as_transposed_tiles(const StridedLayout<N>& layout, TileLayout<N>& tiles) {
  if (layout.ndim != 2) return false;
  bool any_across = false;
  for (int k = 0; k < N; ++k) {
    const int64_t s0 = layout.strides[0][k], s1 = layout.strides[1][k];
    if (s0 == 1 && s1 > 0) {
      tiles.across[k] = false;
    } else if (s1 == 1 && s0 > 0) {
      tiles.across[k] = any_across = true;
    } else {
      return false;
    }
    tiles.stride0[k] = s0;
    tiles.stride1[k] = s1;
  }
  tiles.size0 = layout.sizes[0];
  tiles.size1 = layout.sizes[1];
  return any_across && (tiles.size1 + kTileSide - 1) / kTileSide <= kMaxGridY &&
         (tiles.size0 + kTileSide - 1) / kTileSide <= kMaxGridBlocks;
}

// One 32 x 32 tile a block. Operands 0..NOUT-1 of `layout` are the outputs, NOUT + k input
// k. Phase 1 stages the across inputs, read along dimension 1; phase 2 computes along
// dimension 0 (every load of the phase issued before its first store) and writes the
// outputs that are not across; phase 3 writes the across outputs along dimension 1. An
// output that is the same memory as an input has its strides, so each element is read
// before it is written: by the same thread, or before the block's barrier.
template <typename scalar_t, int NOUT, int NIN, typename Func>
__global__ void __launch_bounds__(kTileSide * kTileRows)
    transposed_tiles_kernel(LaunchControl launch, Func f, OutPtrArray<scalar_t, NOUT> out, PtrArray<scalar_t, NIN> in,
                            TileLayout<NOUT + NIN> layout) {
  begin_after_previous_grid(launch);
  // [operand][dimension 0][dimension 1], one padding column: a warp reading a column of
  // 4-byte elements touches 32 banks.
  __shared__ scalar_t staged[NOUT + NIN][kTileSide][kTileSide + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t base0 = static_cast<int64_t>(blockIdx.x) * kTileSide;
  const int64_t base1 = static_cast<int64_t>(blockIdx.y) * kTileSide;

#pragma unroll
  for (int k = 0; k < NIN; ++k) {
    if (!layout.across[NOUT + k]) continue;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int row = ty + r * kTileRows;
      const int64_t i0 = base0 + row, i1 = base1 + tx;
      if (i0 < layout.size0 && i1 < layout.size1) staged[NOUT + k][row][tx] = in[k][layout.offset(NOUT + k, i0, i1)];
    }
  }
  __syncthreads();

  const int64_t i0 = base0 + tx;
  scalar_t v[kRowsPerThread][NIN];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int row = ty + r * kTileRows;
    const int64_t i1 = base1 + row;
    if (i0 < layout.size0 && i1 < layout.size1) {
#pragma unroll
      for (int k = 0; k < NIN; ++k)
        v[r][k] = layout.across[NOUT + k] ? staged[NOUT + k][tx][row] : in[k][layout.offset(NOUT + k, i0, i1)];
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int row = ty + r * kTileRows;
    const int64_t i1 = base1 + row;
    if (i0 < layout.size0 && i1 < layout.size1) {
      const auto result = apply<scalar_t, NIN>(f, v[r]);
#pragma unroll
      for (int o = 0; o < NOUT; ++o) {
        if (layout.across[o]) {
          staged[o][tx][row] = output<NOUT>(result, o);
        } else {
          out[o][layout.offset(o, i0, i1)] = output<NOUT>(result, o);
        }
      }
    }
  }
  bool outputs_across = false;
#pragma unroll
  for (int o = 0; o < NOUT; ++o) outputs_across |= layout.across[o];
  if (!outputs_across) return;  // the same for every thread of the grid
  __syncthreads();
#pragma unroll
  for (int o = 0; o < NOUT; ++o) {
    if (!layout.across[o]) continue;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int row = ty + r * kTileRows;
      const int64_t j0 = base0 + row, j1 = base1 + tx;
      if (j0 < layout.size0 && j1 < layout.size1) out[o][layout.offset(o, j0, j1)] = staged[o][row][tx];
    }
  }
}

template <typename scalar_t, int NOUT, int NIN, typename Func>
void launch_transposed_tiles(cudaStream_t stream, const TileLayout<NOUT + NIN>& tiles,
                             const OutPtrArray<scalar_t, NOUT>& out, const PtrArray<scalar_t, NIN>& in, const Func& f) {
  const dim3 grid(static_cast<unsigned>((tiles.size0 + kTileSide - 1) / kTileSide),
                  static_cast<unsigned>((tiles.size1 + kTileSide - 1) / kTileSide));
  launch_kernel(transposed_tiles_kernel<scalar_t, NOUT, NIN, Func>, grid, dim3(kTileSide, kTileRows), stream, f, out,
                in, tiles);
}

}  // namespace backplane::cuda
