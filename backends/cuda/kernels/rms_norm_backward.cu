// rms_norm_backward: with r = 1 / sqrt(mean(x^2) + eps) per row,
//   dx = r * grad * w - x * r^3 * mean(grad * w * x)
//   dweight = sum over rows of grad * x * r
// summed in float for float16/bfloat16/float32 and in double for float64.
//
// One pass over x and grad (the fewest bytes: read x and grad, write dx), then a small
// second kernel for dweight:
// - rows kernel: a block per row, grid-stride over rows with a grid of the blocks that
//   fit on the device at once. Each thread loads its kVecs 16-byte vectors of the row of
//   x and of grad at once and keeps them in registers; one barrier gives the block both
//   sums (squares, grad * w * x); dx is stored from the registers (with up to 2 vectors a
//   thread, the next row's are loaded before the barrier, to overlap it). Each thread also
//   sums grad * x * r for its own columns over every row its block takes, and the block
//   writes those sums as its row of `partial` ([blocks, n], float or double; 16-byte
//   stores: n is a whole number of vectors, so each block's row stays aligned).
//   Needs unit-stride rows of whole vectors, 16-byte aligned (x, grad, weight, dx), and
//   at most kMaxThreads * kMaxVecs vectors a row (8192 float32, 16384 bfloat16).
// - strided rows kernel (anything else): a block per row, scalar loads through any
//   strides, two passes over the row; each thread adds its columns' terms to the
//   block's row of `partial` in global memory (no other thread writes those columns).
// - column sums: dweight[j] = sum over blocks of partial[b][j], rounded once, in a fixed
//   order, so the result does not depend on timing.
// Rows may have any strides in their leading dimensions (RowIndexer); dx is contiguous.
#include "dependent_launch.cuh"
#include "inv_rms.cuh"
#include "launch_config.cuh"
#include "row_indexer.cuh"
#include "row_reduce.cuh"
#include "vector_access.cuh"
#include "workspace.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <array>
#include <type_traits>

namespace backplane::cuda {
namespace {

constexpr int kMaxThreads = 512;
constexpr int kMaxWarps = kMaxThreads / kWarpSize;
constexpr int kMaxVecs = 4;  // per thread; more would spill (x, grad and the dweight sums live in registers)

template <typename scalar_t>
struct BackwardParams {
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* grad;
  const scalar_t* x;
  const scalar_t* w;
  scalar_t* dx;
  acc_t* partial;  // [gridDim.x, n]
  RowIndexer rows_of_grad;
  RowIndexer rows_of_x;
  int64_t rows;
  int64_t n;
  int64_t grad_stride;  // along a row (strided kernel only)
  int64_t x_stride;
  int64_t w_stride;
  acc_t eps;
};

// This thread's vectors of row r of x and of grad.
template <typename scalar_t, int kVecs>
__device__ __forceinline__ void load_row(const BackwardParams<scalar_t>& p, int64_t r, int nvec,
                                         Vec16<scalar_t> (&xr)[kVecs], Vec16<scalar_t> (&gr)[kVecs]) {
  using vec_t = Vec16<scalar_t>;
  const auto* x = reinterpret_cast<const vec_t*>(p.x + p.rows_of_x.offset(r));
  const auto* g = reinterpret_cast<const vec_t*>(p.grad + p.rows_of_grad.offset(r));
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < nvec) {
      xr[k] = x[j];
      gr[k] = g[j];
    }
  }
}

template <typename scalar_t, int kVecs>
__global__ void __launch_bounds__(kMaxThreads) rows_kernel(LaunchControl launch, BackwardParams<scalar_t> p) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  using vec_t = Vec16<scalar_t>;
  constexpr int V = kVectorWidth<scalar_t>;
  // With few vectors a thread, the next row's loads are issued before this row's barrier,
  // so they are in flight while the block waits and stores (bfloat16 rows of 4096 fall
  // well behind copy_ without it). With kMaxVecs the registers for a second row would cost
  // occupancy, and those rows already come close to copy_ (see bench/results/).
  constexpr bool kPrefetch = kVecs <= 2;
  __shared__ acc_t scratch[2][2 * kMaxWarps];
  const int nvec = static_cast<int>(p.n / V);
  const auto* w = reinterpret_cast<const vec_t*>(p.w);
  acc_t dw[kVecs][V];
#pragma unroll
  for (int k = 0; k < kVecs; ++k)
#pragma unroll
    for (int e = 0; e < V; ++e) dw[k][e] = 0;
  int parity = 0;
  vec_t xr[kVecs], gr[kVecs];
  if (kPrefetch && blockIdx.x < p.rows) load_row(p, blockIdx.x, nvec, xr, gr);
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    if (!kPrefetch) load_row(p, r, nvec, xr, gr);
    acc_t squares = 0, dot = 0;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int j = threadIdx.x + k * blockDim.x;
      if (j >= nvec) continue;
      const vec_t wv = w[j];
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const acc_t xe = static_cast<acc_t>(xr[k].v[e]);
        squares += xe * xe;
        dot += static_cast<acc_t>(gr[k].v[e]) * static_cast<acc_t>(wv.v[e]) * xe;
      }
    }
    vec_t xn[kVecs], gn[kVecs];
    if (kPrefetch && r + gridDim.x < p.rows) load_row(p, r + gridDim.x, nvec, xn, gn);
    block_sum2<kMaxWarps>(squares, dot, scratch[parity]);
    parity ^= 1;
    const acc_t rstd = inv_rms(squares, p.n, p.eps);
    const acc_t c3 = rstd * rstd * rstd * dot / static_cast<acc_t>(p.n);
    auto* dx = reinterpret_cast<vec_t*>(p.dx + r * p.n);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int j = threadIdx.x + k * blockDim.x;
      if (j >= nvec) continue;
      const vec_t wv = w[j];
      vec_t out;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const acc_t xe = static_cast<acc_t>(xr[k].v[e]), ge = static_cast<acc_t>(gr[k].v[e]);
        out.v[e] = static_cast<scalar_t>(rstd * ge * static_cast<acc_t>(wv.v[e]) - xe * c3);
        dw[k][e] += ge * xe * rstd;
      }
      dx[j] = out;
    }
    if (kPrefetch) {
#pragma unroll
      for (int k = 0; k < kVecs; ++k) {
        xr[k] = xn[k];
        gr[k] = gn[k];
      }
    }
  }
  // Stored 16 bytes at a time: with one 4-byte store per element, a warp's store touched
  // 8 (bfloat16) or 4 (float32) times the sectors it fills (now 2 and 1), and at decode
  // shapes (a block per row, 32 KB of sums a block for rows of 8192) those stores took
  // longer than reading the row.
  using acc_vec_t = Vec16<acc_t>;
  constexpr int A = kVectorWidth<acc_t>;
  static_assert(V % A == 0, "a vector of the row's elements must fill whole vectors of sums");
  auto* partial = reinterpret_cast<acc_vec_t*>(p.partial + blockIdx.x * p.n);
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j >= nvec) continue;
#pragma unroll
    for (int s = 0; s < V / A; ++s) {
      acc_vec_t sums;
#pragma unroll
      for (int e = 0; e < A; ++e) sums.v[e] = dw[k][s * A + e];
      partial[j * (V / A) + s] = sums;
    }
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kMaxThreads) strided_rows_kernel(LaunchControl launch, BackwardParams<scalar_t> p) {
  begin_after_previous_grid(launch);
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ acc_t scratch[2][2 * kMaxWarps];
  acc_t* partial = p.partial + blockIdx.x * p.n;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) partial[i] = 0;
  int parity = 0;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const scalar_t* x = p.x + p.rows_of_x.offset(r);
    const scalar_t* g = p.grad + p.rows_of_grad.offset(r);
    acc_t squares = 0, dot = 0;
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
      const acc_t xe = static_cast<acc_t>(x[i * p.x_stride]);
      squares += xe * xe;
      dot += static_cast<acc_t>(g[i * p.grad_stride]) * static_cast<acc_t>(p.w[i * p.w_stride]) * xe;
    }
    block_sum2<kMaxWarps>(squares, dot, scratch[parity]);
    parity ^= 1;
    const acc_t rstd = inv_rms(squares, p.n, p.eps);
    const acc_t c3 = rstd * rstd * rstd * dot / static_cast<acc_t>(p.n);
    scalar_t* dx = p.dx + r * p.n;
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
      const acc_t xe = static_cast<acc_t>(x[i * p.x_stride]), ge = static_cast<acc_t>(g[i * p.grad_stride]);
      dx[i] = static_cast<scalar_t>(rstd * ge * static_cast<acc_t>(p.w[i * p.w_stride]) - xe * c3);
      partial[i] += ge * xe * rstd;
    }
  }
}

// dweight[j] = sum over b < blocks of partial[b][j]: 32 columns a block, each summed by 8
// threads (b = ty, ty + 8, ...), then in a fixed order through shared memory.
constexpr int kColumns = 32;
constexpr int kSlices = 8;

template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kColumns* kSlices)
    column_sums_kernel(LaunchControl launch, const acc_t* partial, int64_t blocks, int64_t n, scalar_t* dweight,
                       int64_t dweight_stride) {
  begin_after_previous_grid(launch);
  __shared__ acc_t sums[kSlices][kColumns + 1];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  acc_t s = 0;
  if (j < n)
    for (int64_t b = threadIdx.y; b < blocks; b += kSlices) s += partial[b * n + j];
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    acc_t total = 0;
#pragma unroll
    for (int t = 0; t < kSlices; ++t) total += sums[t][threadIdx.x];
    dweight[j * dweight_stride] = static_cast<scalar_t>(total);
  }
}

// Runs a rows kernel with a grid of the blocks that fit on the device at once (cached
// per kernel, thread count and device); returns its blocks' dweight sums ([blocks, n]).
template <auto Kernel, typename scalar_t>
at::TensorBase launch_rows(BackwardParams<scalar_t> p, int threads, const at::TensorBase& x, cudaStream_t stream) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t grid = resident_row_blocks<Kernel>(x.device().index(), threads, p.rows);
  at::TensorBase partial = workspace<acc_t>({grid, p.n}, x);
  p.partial = partial.mutable_data_ptr<acc_t>();
  // rows_kernel stores whole 16-byte vectors of sums; CUDA allocators (a pluggable one
  // included) hand out at least 256-byte aligned blocks, so this only guards that promise.
  TORCH_INTERNAL_ASSERT(is_vector_aligned(p.partial), "backplane::rms_norm_backward: its workspace at ",
                        static_cast<const void*>(p.partial), " is not 16-byte aligned");
  launch_kernel(Kernel, static_cast<unsigned>(grid), threads, stream, p);
  return partial;
}

template <typename scalar_t>
void launch_backward(at::TensorBase& dx, at::TensorBase& dweight, const at::TensorBase& grad, const at::TensorBase& x,
                     const at::TensorBase& weight, double eps) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr std::string_view op = "backplane::rms_norm_backward";
  constexpr int64_t V = kVectorWidth<scalar_t>;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t n = x.size(-1);
  const int64_t rows = x.numel() / n;
  if (rows == 0) {  // no rows: every dweight sum is empty
    dweight.zero_();
    return;
  }
  const StridedLayout<1> x_rows = row_layout(op, x), grad_rows = row_layout(op, grad);
  BackwardParams<scalar_t> p{grad.const_data_ptr<scalar_t>(),
                             x.const_data_ptr<scalar_t>(),
                             weight.const_data_ptr<scalar_t>(),
                             dx.mutable_data_ptr<scalar_t>(),
                             nullptr,
                             RowIndexer(grad_rows),
                             RowIndexer(x_rows),
                             rows,
                             n,
                             grad.stride(-1),
                             x.stride(-1),
                             weight.stride(0),
                             static_cast<acc_t>(eps)};
  const int64_t nvec = n / V;
  at::TensorBase partial;
  const bool vectors = rows_are_vectors<scalar_t>(x, x_rows) && rows_are_vectors<scalar_t>(grad, grad_rows) &&
                       weight.stride(0) == 1 && is_vector_aligned(weight.const_data_ptr()) &&
                       is_vector_aligned(dx.const_data_ptr()) && nvec <= kMaxThreads * kMaxVecs;
  // About 256 threads a row with up to kMaxVecs vectors each (more loads in flight per
  // thread than one vector across 512 threads, which left bfloat16 rows of 4096 far
  // behind copy_; see bench/results/), up to 512 threads for the longest rows.
  if (!vectors) {
    const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, round_up_to_warps(n)));
    partial = launch_rows<strided_rows_kernel<scalar_t>>(p, threads, x, stream);
  } else if (nvec <= 256) {
    partial = launch_rows<rows_kernel<scalar_t, 1>>(p, std::max(kWarpSize, round_up_to_warps(nvec)), x, stream);
  } else if (nvec <= 2 * 256) {
    partial = launch_rows<rows_kernel<scalar_t, 2>>(p, round_up_to_warps((nvec + 1) / 2), x, stream);
  } else {
    partial = launch_rows<rows_kernel<scalar_t, kMaxVecs>>(p, round_up_to_warps((nvec + kMaxVecs - 1) / kMaxVecs), x,
                                                           stream);
  }
  // `partial` may be freed when this returns: the caching allocator reuses its memory
  // only for work queued after the column sums on this stream, which starts after they
  // complete, or (a dependent launch) touches no memory before its wait for them
  // (dependent_launch.cuh).
  const dim3 block(kColumns, kSlices);
  launch_kernel(column_sums_kernel<scalar_t, acc_t>, static_cast<unsigned>((n + kColumns - 1) / kColumns), block,
                stream, partial.const_data_ptr<acc_t>(), partial.size(0), n, dweight.mutable_data_ptr<scalar_t>(),
                dweight.stride(0));
}

}  // namespace

namespace kernels {  // registered by rms_norm_backward.cpp

void rms_norm_backward(at::TensorBase& dx, at::TensorBase& dweight, const at::TensorBase& grad, const at::TensorBase& x,
                       const at::TensorBase& weight, double eps) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_rms_norm_backward_cuda",
                                  [&] { launch_backward<scalar_t>(dx, dweight, grad, x, weight, eps); });
}

}  // namespace kernels
}  // namespace backplane::cuda
