// softmax_backward over the last dimension: per row, dot = sum(grad * y), then
// y * (grad - dot), accumulated in float (double for float64).
//
// Three paths, picked per call, as softmax's forward:
// - register rows: a block per row (many rows of more than 256 vectors), or a grid of
//   the resident blocks looping over rows. Each thread loads its kVecs 16-byte vectors
//   of grad and of y at once and keeps them in registers, so each is read from memory
//   once: block sum of grad * y, then the result stored. Needs contiguous rows of whole vectors, 16-byte aligned, and
//   at most kMaxThreads * kMaxVecs vectors a row (16384 float32, 32768 bfloat16).
// - split rows (rows the register kernel cannot take, fewer rows than multiprocessors,
//   at least kSplitMinRow long): each row cut into chunks, a block per chunk. One kernel
//   writes each chunk's partial dot product, a second sums a row's partials (in the same
//   order in every block, so each row gets one dot) and writes the chunk. A block per row
//   would leave most multiprocessors idle: 32 rows of 32000 float32 then took nearly as
//   long as 4096 rows of 4096 (see bench/results/).
// - two passes (anything else: longer rows, odd lengths, misaligned rows): one 256-thread
//   block per row, the dot product, then the write; the second pass mostly reads from L2.
// Non-contiguous grad or y is made contiguous first (one copy each).
#include "dependent_launch.cuh"
#include "launch_config.cuh"
#include "row_reduce.cuh"
#include "vector_access.cuh"
#include "workspace.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <array>

namespace backplane::cuda {
namespace {

constexpr int kTwoPassThreads = 256;
constexpr int kMaxThreads = 1024;
constexpr int kMaxWarps = kMaxThreads / kWarpSize;
// 16-byte vectors of each input a thread holds: 4 (32 registers of loaded data).
constexpr int kMaxVecs = 4;

template <typename scalar_t, int kVecs>
__global__ void __launch_bounds__(kMaxThreads)
    register_rows_kernel(LaunchControl launch, const scalar_t* __restrict__ grad, const scalar_t* __restrict__ y,
                         scalar_t* __restrict__ out, int64_t rows, int64_t n) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  using vec_t = Vec16<scalar_t>;
  constexpr int V = kVectorWidth<scalar_t>;
  __shared__ acc_t scratch[2][kMaxWarps];
  const int nvec = static_cast<int>(n / V);
  int parity = 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const auto* gr = reinterpret_cast<const vec_t*>(grad + r * n);
    const auto* yr = reinterpret_cast<const vec_t*>(y + r * n);
    vec_t g[kVecs], yv[kVecs];
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int j = threadIdx.x + k * blockDim.x;
      if (j < nvec) {
        g[k] = gr[j];
        yv[k] = yr[j];
      }
    }
    acc_t local_dot = 0;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      if (threadIdx.x + k * blockDim.x >= nvec) continue;
#pragma unroll
      for (int e = 0; e < V; ++e) local_dot += static_cast<acc_t>(g[k].v[e]) * static_cast<acc_t>(yv[k].v[e]);
    }
    const acc_t dot = block_sum<kMaxWarps>(local_dot, scratch[parity]);
    parity ^= 1;
    // Rows of 32000 bfloat16 (4 vectors a thread) spilled 56 bytes a thread without this,
    // and ran slower. float16 did not spill, and timed about the same with it and without
    // it (see bench/results/).
    if constexpr (sizeof(scalar_t) == 2) {
#pragma unroll
      for (int k = 0; k < kVecs; ++k) {
        keep_packed(g[k]);
        keep_packed(yv[k]);
      }
    }
    auto* outr = reinterpret_cast<vec_t*>(out + r * n);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int j = threadIdx.x + k * blockDim.x;
      if (j >= nvec) continue;
      vec_t o;
#pragma unroll
      for (int e = 0; e < V; ++e)
        o.v[e] = static_cast<scalar_t>(static_cast<acc_t>(yv[k].v[e]) * (static_cast<acc_t>(g[k].v[e]) - dot));
      outr[j] = o;
    }
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kTwoPassThreads)
    two_pass_kernel(LaunchControl launch, const scalar_t* __restrict__ grad, const scalar_t* __restrict__ y,
                    scalar_t* __restrict__ out, int64_t n) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int kWarps = kTwoPassThreads / kWarpSize;
  __shared__ acc_t scratch[kWarps];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * n;
  acc_t local_dot = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    local_dot += static_cast<acc_t>(grad[offset + i]) * static_cast<acc_t>(y[offset + i]);
  const acc_t dot = block_sum<kWarps>(local_dot, scratch);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    out[offset + i] = static_cast<scalar_t>(static_cast<acc_t>(y[offset + i]) * (static_cast<acc_t>(grad[offset + i]) - dot));
}

constexpr int kSplitThreads = 256;
constexpr int64_t kSplitMinRow = 4096;
// A chunk is at least this long (4 elements a thread), and a row has at most kMaxChunks,
// which every thread of the write kernel sums.
constexpr int64_t kMinChunk = 4 * kSplitThreads;
constexpr int64_t kMaxChunks = 128;

// Block b covers row b / chunks, elements [c * chunk, (c + 1) * chunk) with c = b % chunks.
template <typename scalar_t>
__global__ void __launch_bounds__(kSplitThreads)
    chunk_dot_kernel(LaunchControl launch, const scalar_t* __restrict__ grad, const scalar_t* __restrict__ y,
                     at::opmath_type<scalar_t>* __restrict__ partial, int64_t n, int64_t chunk, int chunks) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ acc_t scratch[kSplitThreads / kWarpSize];
  const int64_t row = blockIdx.x / chunks;
  const int64_t begin = (blockIdx.x % chunks) * chunk;
  const int64_t end = std::min(n, begin + chunk);
  const int64_t offset = row * n;
  acc_t local_dot = 0;
#pragma unroll 4
  for (int64_t i = begin + threadIdx.x; i < end; i += kSplitThreads)
    local_dot += static_cast<acc_t>(grad[offset + i]) * static_cast<acc_t>(y[offset + i]);
  const acc_t dot = block_sum<kSplitThreads / kWarpSize>(local_dot, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = dot;
}

template <typename scalar_t>
__global__ void __launch_bounds__(kSplitThreads)
    chunk_write_kernel(LaunchControl launch, const scalar_t* __restrict__ grad, const scalar_t* __restrict__ y,
                       const at::opmath_type<scalar_t>* __restrict__ partial, scalar_t* __restrict__ out, int64_t n,
                       int64_t chunk, int chunks) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t row = blockIdx.x / chunks;
  const int64_t begin = (blockIdx.x % chunks) * chunk;
  const int64_t end = std::min(n, begin + chunk);
  const int64_t offset = row * n;
  acc_t dot = 0;
  for (int k = 0; k < chunks; ++k) dot += partial[row * chunks + k];
#pragma unroll 4
  for (int64_t i = begin + threadIdx.x; i < end; i += kSplitThreads)
    out[offset + i] =
        static_cast<scalar_t>(static_cast<acc_t>(y[offset + i]) * (static_cast<acc_t>(grad[offset + i]) - dot));
}

// About four blocks a multiprocessor in all, chunks a multiple of a warp's width long.
template <typename scalar_t>
void launch_split_rows(const scalar_t* grad, const scalar_t* y, scalar_t* out, int64_t rows, int64_t n,
                       const at::TensorBase& like, cudaStream_t stream) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t wanted = (4 * multiprocessor_count(like.device().index()) + rows - 1) / rows;
  const int64_t most_chunks = std::min<int64_t>(kMaxChunks, std::max<int64_t>(1, n / kMinChunk));
  const int64_t target_chunks = std::clamp<int64_t>(wanted, 1, most_chunks);
  const int64_t per_chunk = (n + target_chunks - 1) / target_chunks;
  const int64_t chunk = (per_chunk + kWarpSize - 1) / kWarpSize * kWarpSize;
  const int chunks = static_cast<int>((n + chunk - 1) / chunk);
  const at::TensorBase partial = workspace<acc_t>({rows * chunks}, like);
  acc_t* p = partial.mutable_data_ptr<acc_t>();
  const auto grid = static_cast<unsigned>(rows * chunks);
  launch_kernel(chunk_dot_kernel<scalar_t>, grid, kSplitThreads, stream, grad, y, p, n, chunk, chunks);
  launch_kernel(chunk_write_kernel<scalar_t>, grid, kSplitThreads, stream, grad, y, p, out, n, chunk, chunks);
}

// A grid of one block per row, or of the blocks resident at once (cached per kernel,
// thread count and device), at most one per row.
template <typename scalar_t, int kVecs>
void launch_register_rows(const scalar_t* grad, const scalar_t* y, scalar_t* out, int64_t rows, int64_t n,
                          int64_t nvec, c10::DeviceIndex device, cudaStream_t stream, bool one_block_per_row) {
  constexpr auto kernel = register_rows_kernel<scalar_t, kVecs>;
  const int threads = std::max(kWarpSize, round_up_to_warps((nvec + kVecs - 1) / kVecs));
  const int64_t grid = one_block_per_row ? rows : resident_row_blocks<kernel>(device, threads, rows);
  launch_kernel(kernel, static_cast<unsigned>(grid), threads, stream, grad, y, out, rows, n);
}

template <typename scalar_t>
void launch_softmax_backward(const at::TensorBase& gc, const at::TensorBase& yc, at::TensorBase& out, int64_t rows, int64_t n) {
  constexpr int V = kVectorWidth<scalar_t>;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const scalar_t* grad = gc.const_data_ptr<scalar_t>();
  const scalar_t* y = yc.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  const int64_t nvec = n / V;
  const bool vectors = n % V == 0 && is_vector_aligned(grad) && is_vector_aligned(y) && is_vector_aligned(o) &&
                       nvec <= kMaxThreads * kMaxVecs;
  const c10::DeviceIndex device = out.device().index();
  // About 256 threads a row where that covers it; longer rows take more threads (up to
  // 1024) before more vectors per thread. Many rows of more than 256 vectors take a block
  // per row, as softmax's forward, with the same vectors a thread (4 a thread made
  // bfloat16 rows of 4096 much slower); that beats the grid of resident blocks looping over
  // rows (see bench/results/).
  const bool one_block_per_row = many_rows(rows, device);
  if (!vectors && rows < multiprocessor_count(device) && n >= kSplitMinRow) {
    launch_split_rows<scalar_t>(grad, y, o, rows, n, out, stream);
  } else if (!vectors) {
    launch_kernel(two_pass_kernel<scalar_t>, static_cast<unsigned>(rows), kTwoPassThreads, stream, grad, y, o, n);
  } else if (nvec <= 256) {
    launch_register_rows<scalar_t, 1>(grad, y, o, rows, n, nvec, device, stream, false);
  } else if (nvec <= 2 * kMaxThreads) {
    launch_register_rows<scalar_t, 2>(grad, y, o, rows, n, nvec, device, stream, one_block_per_row);
  } else {
    launch_register_rows<scalar_t, kMaxVecs>(grad, y, o, rows, n, nvec, device, stream, one_block_per_row);
  }
}

}  // namespace

namespace kernels {  // registered by softmax_backward.cpp

void softmax_backward(at::TensorBase& out, const at::TensorBase& grad, const at::TensorBase& y) {
  const at::TensorBase gc = grad.contiguous(), yc = y.contiguous();
  const int64_t n = y.dim() == 0 ? 1 : y.size(-1);
  const int64_t rows = yc.numel() / n;
  TORCH_CHECK(rows <= INT32_MAX, "backplane::softmax_backward: at most 2^31 - 1 rows on CUDA, found ", rows);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "backplane_softmax_backward_cuda",
                                  [&] { launch_softmax_backward<scalar_t>(gc, yc, out, rows, n); });
}

}  // namespace kernels
}  // namespace backplane::cuda
