// rms_norm: y = x / sqrt(mean(x^2 over the last dimension) + eps) * weight, summed in
// float for float16/bfloat16/float32 and in double for float64.
//
// Three kernels, picked per call:
// - warp per row (rows of at most 128 16-byte vectors: 512 float32, 1024 bfloat16):
//   8 rows per 256-thread block, shuffles only, no barrier.
// - block per row (up to 4096 vectors: 16384 float32, 32768 bfloat16, 8192 float64):
//   each thread loads its kVecs (<= 8) vectors of the row at once (the whole row in
//   flight), keeps them in registers, block-sums the squares, then scales and stores
//   them, so x is read from memory once. At most 256 threads up to 2048 vectors (all
//   of hidden 8192 in float32), at most 512 beyond; more vectors per thread would
//   spill registers.
// Both need a unit last-dimension stride, rows and weight 16-byte aligned and a row
// length that is a multiple of the vector width.
// - strided (anything else: a strided or transposed last dimension, odd lengths,
//   misaligned rows, a strided weight, longer rows): one block per row, two passes
//   over the row with scalar loads (the second mostly from L2).
// Rows may have any strides in their leading dimensions (padded, offset, expanded):
// row r starts at rows_of_x.offset(r) in x; y is contiguous, row r at r * n.
#include "dependent_launch.cuh"
#include "inv_rms.cuh"
#include "launch_config.cuh"
#include "row_indexer.cuh"
#include "row_reduce.cuh"
#include "strided_indexing.cuh"
#include "vector_access.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <type_traits>

namespace backplane::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kMaxRowThreads = 512;
constexpr int kMaxRowWarps = kMaxRowThreads / kWarpSize;
constexpr int kMaxWarpVecs = 4;     // warp per row up to 32 * 4 vectors
constexpr int kMaxBlockVecs = 8;    // block per row up to 512 * 8 vectors

template <typename scalar_t>
struct RmsNormParams {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* x;
  const scalar_t* w;
  scalar_t* y;
  RowIndexer rows_of_x;
  int64_t rows;
  int64_t n;         // row length
  int64_t x_stride;  // along a row (strided kernel only)
  int64_t w_stride;  // likewise
  acc_t eps;
};

// x * inv * w for one vector, in the same order as the CPU kernel.
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ Vec16<scalar_t> normalized(const Vec16<scalar_t>& x, const Vec16<scalar_t>& w, acc_t inv) {
  Vec16<scalar_t> y;
#pragma unroll
  for (int e = 0; e < kVectorWidth<scalar_t>; ++e)
    y.v[e] = static_cast<scalar_t>(static_cast<acc_t>(x.v[e]) * inv * static_cast<acc_t>(w.v[e]));
  return y;
}

template <typename scalar_t, typename acc_t>
__device__ __forceinline__ acc_t sum_squares(const Vec16<scalar_t>& x) {
  acc_t s = 0;
#pragma unroll
  for (int e = 0; e < kVectorWidth<scalar_t>; ++e) {
    const acc_t v = static_cast<acc_t>(x.v[e]);
    s += v * v;
  }
  return s;
}

template <typename scalar_t, int kVecs>
__global__ void __launch_bounds__(kRowThreads) rms_norm_warp_kernel(LaunchControl launch, RmsNormParams<scalar_t> p) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  using vec_t = Vec16<scalar_t>;
  const int nvec = static_cast<int>(p.n / kVectorWidth<scalar_t>);
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = blockDim.x / kWarpSize;
  const auto* w = reinterpret_cast<const vec_t*>(p.w);
  for (int64_t r = blockIdx.x * warps + threadIdx.x / kWarpSize; r < p.rows; r += gridDim.x * warps) {
    const auto* x = reinterpret_cast<const vec_t*>(p.x + p.rows_of_x.offset(r));
    vec_t row[kVecs];
#pragma unroll
    for (int k = 0; k < kVecs; ++k)
      if (lane + k * kWarpSize < nvec) row[k] = x[lane + k * kWarpSize];
    acc_t ss = 0;
#pragma unroll
    for (int k = 0; k < kVecs; ++k)
      if (lane + k * kWarpSize < nvec) ss += sum_squares<scalar_t, acc_t>(row[k]);
    const acc_t inv = inv_rms(warp_sum(ss), p.n, p.eps);
    auto* y = reinterpret_cast<vec_t*>(p.y + r * p.n);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int j = lane + k * kWarpSize;
      if (j < nvec) y[j] = normalized(row[k], w[j], inv);
    }
  }
}

template <typename scalar_t, int kVecs>
__global__ void __launch_bounds__(kMaxRowThreads)
    rms_norm_block_kernel(LaunchControl launch, RmsNormParams<scalar_t> p) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  using vec_t = Vec16<scalar_t>;
  __shared__ acc_t scratch[2][kMaxRowWarps];
  const int nvec = static_cast<int>(p.n / kVectorWidth<scalar_t>);
  const auto* w = reinterpret_cast<const vec_t*>(p.w);
  int parity = 0;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const auto* x = reinterpret_cast<const vec_t*>(p.x + p.rows_of_x.offset(r));
    vec_t row[kVecs];
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int j = threadIdx.x + k * blockDim.x;
      if (j < nvec) row[k] = x[j];
    }
    acc_t ss = 0;
#pragma unroll
    for (int k = 0; k < kVecs; ++k)
      if (threadIdx.x + k * blockDim.x < nvec) ss += sum_squares<scalar_t, acc_t>(row[k]);
    const acc_t inv = inv_rms(block_sum<kMaxRowWarps>(ss, scratch[parity]), p.n, p.eps);
    parity ^= 1;
    auto* y = reinterpret_cast<vec_t*>(p.y + r * p.n);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int j = threadIdx.x + k * blockDim.x;
      if (j < nvec) y[j] = normalized(row[k], w[j], inv);
    }
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kMaxRowThreads)
    rms_norm_strided_kernel(LaunchControl launch, RmsNormParams<scalar_t> p) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ double scratch[2][kMaxRowWarps];
  int parity = 0;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const scalar_t* x = p.x + p.rows_of_x.offset(r);
    // Summed in double, threads combined in a tree: rows here are long (past 4096
    // vectors) or strided, and a float sum of one with an outlier or of 2^31 elements
    // loses its small terms. Memory-bound either way, so double costs no time here.
    double ss = 0;
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
      const double v = static_cast<double>(x[i * p.x_stride]);
      ss += v * v;
    }
    const acc_t inv = static_cast<acc_t>(
        inv_rms(block_sum<kMaxRowWarps>(ss, scratch[parity]), p.n, static_cast<double>(p.eps)));
    parity ^= 1;
    scalar_t* y = p.y + r * p.n;
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x)
      y[i] = static_cast<scalar_t>(static_cast<acc_t>(x[i * p.x_stride]) * inv *
                                   static_cast<acc_t>(p.w[i * p.w_stride]));
  }
}

template <typename scalar_t, int kVecs>
void launch_warp(const RmsNormParams<scalar_t>& p, cudaStream_t stream) {
  const int64_t rows_per_block = kRowThreads / kWarpSize;
  const int64_t grid = blocks_for(p.rows, rows_per_block, kMaxGridBlocks);
  launch_kernel(rms_norm_warp_kernel<scalar_t, kVecs>, static_cast<unsigned>(grid), kRowThreads, stream, p);
}

template <typename scalar_t, int kVecs>
void launch_block(const RmsNormParams<scalar_t>& p, int64_t nvec, cudaStream_t stream) {
  const int threads = round_up_to_warps((nvec + kVecs - 1) / kVecs);
  const int64_t grid = std::min(p.rows, kMaxGridBlocks);
  launch_kernel(rms_norm_block_kernel<scalar_t, kVecs>, static_cast<unsigned>(grid), threads, stream, p);
}

// True when every row of x starts 16-byte aligned and is whole vectors, and so are
// weight and the output.
template <typename scalar_t>
bool rows_are_vectors(const at::TensorBase& x, const StridedLayout<1>& rows, const at::TensorBase& weight,
                      const at::TensorBase& out) {
  return rows_are_vectors<scalar_t>(x, rows) && weight.stride(0) == 1 && is_vector_aligned(weight.const_data_ptr()) &&
         is_vector_aligned(out.const_data_ptr());
}

template <typename scalar_t>
void launch_rms_norm(std::string_view op, const at::TensorBase& x, const at::TensorBase& weight, double eps,
                     at::TensorBase& out) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int64_t V = kVectorWidth<scalar_t>;
  const int64_t n = x.size(-1);
  const StridedLayout<1> rows = row_layout(op, x);
  const RmsNormParams<scalar_t> p{x.const_data_ptr<scalar_t>(),
                                  weight.const_data_ptr<scalar_t>(),
                                  out.mutable_data_ptr<scalar_t>(),
                                  RowIndexer(rows),
                                  out.numel() / n,
                                  n,
                                  x.stride(-1),
                                  weight.stride(0),
                                  static_cast<acc_t>(eps)};
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t nvec = n / V;
  if (!rows_are_vectors<scalar_t>(x, rows, weight, out) || nvec > kMaxRowThreads * kMaxBlockVecs) {
    const int threads = static_cast<int>(std::min<int64_t>(kMaxRowThreads, round_up_to_warps(n)));
    const int64_t grid = std::min(p.rows, kMaxGridBlocks);
    launch_kernel(rms_norm_strided_kernel<scalar_t>, static_cast<unsigned>(grid), threads, stream, p);
  } else if (nvec <= 1 * kWarpSize) {
    launch_warp<scalar_t, 1>(p, stream);
  } else if (nvec <= 2 * kWarpSize) {
    launch_warp<scalar_t, 2>(p, stream);
  } else if (nvec <= kMaxWarpVecs * kWarpSize) {
    launch_warp<scalar_t, kMaxWarpVecs>(p, stream);
  } else if (nvec <= 1 * kRowThreads) {
    launch_block<scalar_t, 1>(p, nvec, stream);
  } else if (nvec <= 2 * kRowThreads) {
    launch_block<scalar_t, 2>(p, nvec, stream);
  } else if (nvec <= 4 * kRowThreads) {
    launch_block<scalar_t, 4>(p, nvec, stream);
  } else {
    launch_block<scalar_t, kMaxBlockVecs>(p, nvec, stream);
  }
}

}  // namespace

namespace kernels {  // registered by rms_norm.cpp

void rms_norm(at::TensorBase& out, const at::TensorBase& x, const at::TensorBase& weight, double eps) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_rms_norm_cuda",
                                  [&] { launch_rms_norm<scalar_t>("backplane::rms_norm", x, weight, eps, out); });
}

}  // namespace kernels
}  // namespace backplane::cuda
