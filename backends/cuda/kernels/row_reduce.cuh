// Sums and maxima across a warp and across a block, for row-wise kernels (rms_norm,
// softmax). The order
// of additions is fixed, so a row's result is the same on every run.
#pragma once

#include "launch_config.cuh"

#include <algorithm>
#include <cstdint>

namespace backplane::cuda {

// Threads for a row kernel: `threads` rounded up to whole warps (the block reductions
// below need a multiple of 32). Clamped to 2^20 first: callers cap the count at a
// block's size, and a row of 2^31 elements must not wrap to a negative int.
inline int round_up_to_warps(int64_t threads) {
  threads = std::min<int64_t>(threads, int64_t{1} << 20);
  return static_cast<int>((threads + kWarpSize - 1) / kWarpSize * kWarpSize);
}

template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum of v over the block; every thread gets it. blockDim.x is a multiple of 32 and at
// most 32 * kMaxWarps. One barrier: each thread then adds the per-warp partials itself,
// in the same order. `scratch` (kMaxWarps values) is written before that barrier and read
// after it, so the next call may write it only after another barrier: alternate two
// buffers between consecutive calls.
template <int kMaxWarps, typename acc_t>
__device__ __forceinline__ acc_t block_sum(acc_t v, acc_t* scratch) {
  v = warp_sum(v);
  if (threadIdx.x % kWarpSize == 0) scratch[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  acc_t total = 0;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
#pragma unroll
  for (int w = 0; w < kMaxWarps; ++w)
    if (w < warps) total += scratch[w];
  return total;
}

// Two sums at once (rms_norm_backward's sum of squares and dot product), one barrier:
// a and b each become their sum over the block. `scratch` holds 2 * kMaxWarps values,
// with block_sum's contract.
template <int kMaxWarps, typename acc_t>
__device__ __forceinline__ void block_sum2(acc_t& a, acc_t& b, acc_t* scratch) {
  a = warp_sum(a);
  b = warp_sum(b);
  if (threadIdx.x % kWarpSize == 0) {
    scratch[threadIdx.x / kWarpSize] = a;
    scratch[kMaxWarps + threadIdx.x / kWarpSize] = b;
  }
  __syncthreads();
  a = 0;
  b = 0;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
#pragma unroll
  for (int w = 0; w < kMaxWarps; ++w)
    if (w < warps) {
      a += scratch[w];
      b += scratch[kMaxWarps + w];
    }
}

template <typename acc_t>
__device__ __forceinline__ acc_t warp_max(acc_t v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const acc_t other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = (other > v || other != other) ? other : v;  // NaN wins, as torch.max
  }
  return v;
}

// Maximum of v over the block; every thread gets it. The same contract as block_sum.
template <int kMaxWarps, typename acc_t>
__device__ __forceinline__ acc_t block_max(acc_t v, acc_t* scratch) {
  v = warp_max(v);
  if (threadIdx.x % kWarpSize == 0) scratch[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  acc_t best = scratch[0];
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
#pragma unroll
  for (int w = 1; w < kMaxWarps; ++w)
    if (w < warps) best = (scratch[w] > best || scratch[w] != scratch[w]) ? scratch[w] : best;
  return best;
}

}  // namespace backplane::cuda
