// softmax over the last dimension, accumulated in float (double for float64).
//
// Two kernels, picked per call:
// - register rows: a block per row; with few rows a grid of the resident blocks striding
//   over rows. Each thread loads its kVecs
//   16-byte vectors of the row at once and keeps them in registers, so x is read from
//   memory once: block max, block sum of exp, then exp again, scaled, stored. Needs
//   contiguous rows of whole vectors, 16-byte aligned, and at most kMaxThreads * kMaxVecs
//   vectors (32768 float32 or bfloat16: a 32000-word vocabulary row fits). Up to 1024
//   threads a row, so a few long rows (decode-time logits) still keep many loads in
//   flight on each multiprocessor they occupy. With at most 2 vectors a thread, a block
//   loads its next row before reducing the current one.
// - three passes (anything else: longer rows, odd lengths, misaligned rows): one
//   256-thread block per row, max, sum of exp(x - max), then write; the second and third
//   passes mostly read from L2.
// A non-contiguous x is made contiguous first (one copy).
#include "dependent_launch.cuh"
#include "launch_config.cuh"
#include "row_reduce.cuh"
#include "vector_access.cuh"

#include <ATen/Dispatch.h>
#include <ATen/core/TensorBase.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <array>
#include <type_traits>

namespace backplane::cuda {
namespace {

constexpr int kThreePassThreads = 256;
constexpr int kMaxThreads = 1024;
constexpr int kMaxWarps = kMaxThreads / kWarpSize;
// 16-byte vectors a thread holds: 8 float32 (32 registers); 4 of the others, whose
// conversion to opmath needs more (8 spilled registers at 1024 threads).
template <typename scalar_t>
constexpr int kMaxVecs = std::is_same_v<scalar_t, float> ? 8 : 4;

// exp(v) in acc_t, for v = x - max <= 0. Outputs of float16 and bfloat16 keep 11 or 8
// bits, so there it is the hardware's approximation (__expf: ex2.approx of v * log2(e), a
// few float ulp; results below float's normal range flush to 0) at 2 instructions, not
// expf's ten or so; computed twice per element, that speeds up 2-byte rows markedly. float32
// keeps the library's expf: __expf gained it little, not worth its error against
// assert_close's float32 rtol (see bench/results/). float64 keeps exp.
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ acc_t exp_of(acc_t v) {
  if constexpr (std::is_same_v<acc_t, double>)
    return ::exp(v);
  else if constexpr (sizeof(scalar_t) == 2)
    return __expf(v);
  else
    return ::expf(v);
}

// This thread's vectors of row r.
template <typename scalar_t, int kVecs>
__device__ __forceinline__ void load_row(const scalar_t* x, int64_t r, int64_t n, int nvec,
                                         Vec16<scalar_t> (&loaded)[kVecs]) {
  const auto* xr = reinterpret_cast<const Vec16<scalar_t>*>(x + r * n);
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nvec) loaded[k] = xr[j];
  }
}

template <typename scalar_t, int kVecs>
__global__ void __launch_bounds__(kMaxThreads)
    register_rows_kernel(LaunchControl launch, const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t rows,
                         int64_t n) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  using vec_t = Vec16<scalar_t>;
  constexpr int V = kVectorWidth<scalar_t>;
  // With few vectors a thread, the next row's loads are issued before this row's two
  // barriers, so they are in flight while the block reduces and stores (faster rows of 4096
  // in float32 and bfloat16; see bench/results/). More vectors would cost registers
  // (occupancy) for the second row.
  constexpr bool kPrefetch = kVecs <= 2;
  __shared__ acc_t scratch[2][kMaxWarps];
  const int nvec = static_cast<int>(n / V);
  int parity = 0;
  vec_t loaded[kVecs];
  if (kPrefetch && blockIdx.x < rows) load_row(x, blockIdx.x, n, nvec, loaded);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (!kPrefetch) load_row(x, r, n, nvec, loaded);
    acc_t local_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      if (threadIdx.x + k * blockDim.x >= nvec) continue;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const acc_t v = static_cast<acc_t>(loaded[k].v[e]);
        local_max = (v > local_max || v != v) ? v : local_max;
      }
    }
    vec_t next[kVecs];
    if (kPrefetch && r + gridDim.x < rows) load_row(x, r + gridDim.x, n, nvec, next);
    const acc_t max = block_max<kMaxWarps>(local_max, scratch[parity]);
    parity ^= 1;
    // exp is computed twice (sum, then store) rather than held: holding opmath values
    // beside the loaded ones spilled registers at 1024 threads.
    acc_t local_sum = 0;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      if (threadIdx.x + k * blockDim.x >= nvec) continue;
#pragma unroll
      for (int e = 0; e < V; ++e) local_sum += exp_of<scalar_t>(static_cast<acc_t>(loaded[k].v[e]) - max);
    }
    const acc_t inv = acc_t(1) / block_sum<kMaxWarps>(local_sum, scratch[parity]);
    parity ^= 1;
    auto* yr = reinterpret_cast<vec_t*>(y + r * n);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int j = threadIdx.x + k * blockDim.x;
      if (j >= nvec) continue;
      vec_t out;
#pragma unroll
      for (int e = 0; e < V; ++e) out.v[e] = static_cast<scalar_t>(exp_of<scalar_t>(static_cast<acc_t>(loaded[k].v[e]) - max) * inv);
      yr[j] = out;
    }
    if (kPrefetch) {
#pragma unroll
      for (int k = 0; k < kVecs; ++k) loaded[k] = next[k];
    }
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreePassThreads)
    three_pass_kernel(LaunchControl launch, const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int kWarps = kThreePassThreads / kWarpSize;
  __shared__ acc_t scratch[2][kWarps];
  const scalar_t* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  scalar_t* yr = y + static_cast<int64_t>(blockIdx.x) * n;
  acc_t local_max = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const acc_t v = static_cast<acc_t>(xr[i]);
    local_max = (v > local_max || v != v) ? v : local_max;
  }
  const acc_t max = block_max<kWarps>(local_max, scratch[0]);
  acc_t local_sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) local_sum += exp_of<scalar_t>(static_cast<acc_t>(xr[i]) - max);
  const acc_t inv = acc_t(1) / block_sum<kWarps>(local_sum, scratch[1]);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    yr[i] = static_cast<scalar_t>(exp_of<scalar_t>(static_cast<acc_t>(xr[i]) - max) * inv);
}

// A grid of one block per row, or of the blocks resident at once (cached per kernel,
// thread count and device), at most one per row.
template <typename scalar_t, int kVecs>
void launch_register_rows(const scalar_t* x, scalar_t* y, int64_t rows, int64_t n, int64_t nvec,
                          c10::DeviceIndex device, cudaStream_t stream, bool one_block_per_row) {
  constexpr auto kernel = register_rows_kernel<scalar_t, kVecs>;
  const int threads = std::max(kWarpSize, round_up_to_warps((nvec + kVecs - 1) / kVecs));
  const int64_t grid = one_block_per_row ? rows : resident_row_blocks<kernel>(device, threads, rows);
  launch_kernel(kernel, static_cast<unsigned>(grid), threads, stream, x, y, rows, n);
}

template <typename scalar_t>
void launch_softmax(const at::TensorBase& xc, at::TensorBase& out, int64_t rows, int64_t n) {
  constexpr int V = kVectorWidth<scalar_t>;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const scalar_t* x = xc.const_data_ptr<scalar_t>();
  scalar_t* y = out.mutable_data_ptr<scalar_t>();
  const int64_t nvec = n / V;
  const bool vectors =
      n % V == 0 && is_vector_aligned(x) && is_vector_aligned(y) && nvec <= kMaxThreads * kMaxVecs<scalar_t>;
  const c10::DeviceIndex device = out.device().index();
  // Many rows (many_rows: at least 4 a multiprocessor) of up to 4 vectors a thread: a
  // block per row, 4 vectors a thread, and the block scheduler overlaps one
  // block's reductions with the next one's loads: faster than the grid of resident blocks
  // looping over rows with 2 vectors a thread (see bench/results/). Few rows instead take
  // about 256 threads a row where that covers it, longer rows more threads (up to 1024)
  // before more vectors per thread, which ran slower.
  if (!vectors) {
    launch_kernel(three_pass_kernel<scalar_t>, static_cast<unsigned>(rows), kThreePassThreads, stream, x, y, n);
  } else if (nvec <= 256) {
    launch_register_rows<scalar_t, 1>(x, y, rows, n, nvec, device, stream, false);
  } else if (many_rows(rows, device) && nvec <= 4 * kMaxThreads) {
    launch_register_rows<scalar_t, 4>(x, y, rows, n, nvec, device, stream, true);
  } else if (nvec <= 2 * kMaxThreads) {
    launch_register_rows<scalar_t, 2>(x, y, rows, n, nvec, device, stream, false);
  } else if (nvec <= 4 * kMaxThreads) {
    launch_register_rows<scalar_t, 4>(x, y, rows, n, nvec, device, stream, false);
  } else {
    launch_register_rows<scalar_t, kMaxVecs<scalar_t>>(x, y, rows, n, nvec, device, stream, false);
  }
}

}  // namespace

namespace kernels {  // registered by softmax.cpp

void softmax(at::TensorBase& out, const at::TensorBase& x) {
  const at::TensorBase xc = x.contiguous();
  const int64_t n = x.dim() == 0 ? 1 : x.size(-1);
  const int64_t rows = xc.numel() / n;
  TORCH_CHECK(rows <= INT32_MAX, "backplane::softmax: at most 2^31 - 1 rows on CUDA, found ", rows);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_softmax_cuda",
                                  [&] { launch_softmax<scalar_t>(xc, out, rows, n); });
}

}  // namespace kernels
}  // namespace backplane::cuda
