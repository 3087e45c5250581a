// softmax over the last dimension: one 256-thread block per row, three passes over
// the row (max, sum of exp(x - max), write), accumulated in float (double for
// float64); the second and third passes mostly read from L2. A non-contiguous x is made
// contiguous first (one copy). Limits: a simple kernel, not yet tuned (no warp-per-row
// path for short rows, no single-read path for rows that fit in registers).
#include "row_reduce.cuh"

#include <backplane/kernel.h>

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

namespace backplane::cuda {
namespace {

constexpr int kSoftmaxThreads = 256;
constexpr int kSoftmaxWarps = kSoftmaxThreads / kWarpSize;

template <typename scalar_t>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ acc_t scratch[2][kSoftmaxWarps];
  const scalar_t* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  scalar_t* yr = y + static_cast<int64_t>(blockIdx.x) * n;
  acc_t local_max = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const acc_t v = static_cast<acc_t>(xr[i]);
    local_max = (v > local_max || v != v) ? v : local_max;
  }
  const acc_t max = block_max<kSoftmaxWarps>(local_max, scratch[0]);
  acc_t local_sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) local_sum += ::exp(static_cast<acc_t>(xr[i]) - max);
  const acc_t inv = acc_t(1) / block_sum<kSoftmaxWarps>(local_sum, scratch[1]);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    yr[i] = static_cast<scalar_t>(::exp(static_cast<acc_t>(xr[i]) - max) * inv);
}

}  // namespace

void softmax(at::Tensor& out, const at::Tensor& x) {
  const at::Tensor xc = x.contiguous();
  const int64_t n = x.dim() == 0 ? 1 : x.size(-1);
  const int64_t rows = xc.numel() / n;
  TORCH_CHECK(rows <= INT32_MAX, "backplane::softmax: at most 2^31 - 1 rows on CUDA, found ", rows);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_softmax_cuda", [&] {
    softmax_kernel<scalar_t><<<static_cast<unsigned>(rows), kSoftmaxThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, softmax, backplane::cuda::softmax)
