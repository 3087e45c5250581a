// rotary: each pair (x[..., i], x[..., i + D/2]) rotated by cos/sin[..., i], in opmath
// (float for float16 and bfloat16), rounded once. One thread takes one item of the
// halved shape [..., D/2] and writes both halves of its pair, so x is read once and out
// written once. Offsets come from one OffsetCalculator over four operands (the first
// halves of out and x, cos, sin); the second halves sit D/2 * stride(-1) further on.
// x may be any view (q or k sliced from a fused qkv tensor, transposed heads): it is read
// in place. When every operand's innermost dimension is unit-stride whole 16-byte vectors
// and all six addresses are aligned (contiguous or head-sliced x with D/2 a multiple of
// the vector width), an item is a 16-byte vector per operand.
#include "elementwise.cuh"

#include <backplane/kernel.h>

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <array>

namespace backplane::cuda {
namespace {

constexpr int kOperands = 4;  // out (first half), x (first half), cos, sin

template <typename scalar_t, int W, typename index_t>
__global__ void __launch_bounds__(kBlockThreads)
    rotary_kernel(scalar_t* out, const scalar_t* x, const scalar_t* cos, const scalar_t* sin, int64_t out_half,
                  int64_t x_half, OffsetCalculator<kOperands, index_t> calc, index_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  using item_t = Vector<scalar_t, W>;
  auto* y1 = reinterpret_cast<item_t*>(out);
  auto* y2 = reinterpret_cast<item_t*>(out + out_half);
  const auto* x1 = reinterpret_cast<const item_t*>(x);
  const auto* x2 = reinterpret_cast<const item_t*>(x + x_half);
  const auto* c = reinterpret_cast<const item_t*>(cos);
  const auto* s = reinterpret_cast<const item_t*>(sin);
  const index_t step = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const auto offsets = calc.get(i);
    const item_t a = x1[offsets[1]], b = x2[offsets[1]], cv = c[offsets[2]], sv = s[offsets[3]];
    item_t r1, r2;
#pragma unroll
    for (int e = 0; e < W; ++e) {
      const opmath_t p = a.v[e], q = b.v[e], ce = cv.v[e], se = sv.v[e];
      r1.v[e] = static_cast<scalar_t>(p * ce - q * se);
      r2.v[e] = static_cast<scalar_t>(q * ce + p * se);
    }
    y1[offsets[0]] = r1;
    y2[offsets[0]] = r2;
  }
}

template <typename scalar_t, int W>
void launch_rotary(c10::DeviceIndex device, cudaStream_t stream, const StridedLayout<kOperands>& layout, scalar_t* out,
            const scalar_t* x, const scalar_t* cos, const scalar_t* sin, int64_t out_half, int64_t x_half) {
  const int64_t n = layout.numel();
  if (layout.fits_32bit()) {
    static PerDeviceCache cache;
    const auto kernel = rotary_kernel<scalar_t, W, unsigned int>;
    const int64_t grid = blocks_for(n, kBlockThreads, resident_blocks(cache, device, kernel, kBlockThreads));
    kernel<<<static_cast<unsigned>(grid), kBlockThreads, 0, stream>>>(
        out, x, cos, sin, out_half, x_half, OffsetCalculator<kOperands, unsigned int>(layout),
        static_cast<unsigned int>(n));
  } else {
    static PerDeviceCache cache;
    const auto kernel = rotary_kernel<scalar_t, W, int64_t>;
    const int64_t grid = blocks_for(n, kBlockThreads, resident_blocks(cache, device, kernel, kBlockThreads));
    kernel<<<static_cast<unsigned>(grid), kBlockThreads, 0, stream>>>(
        out, x, cos, sin, out_half, x_half, OffsetCalculator<kOperands, int64_t>(layout), n);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void rotary(at::Tensor& out, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  std::vector<int64_t> halved = out.sizes().vec();
  halved.back() = half;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "backplane_rotary_cuda", [&] {
    const auto cos_strides = broadcast_strides(cos, halved);
    const auto sin_strides = broadcast_strides(sin, halved);
    StridedLayout<kOperands> layout = make_layout<kOperands>(
        "backplane::rotary", halved, {out.strides(), x.strides(), c10::ArrayRef<int64_t>(cos_strides),
                                      c10::ArrayRef<int64_t>(sin_strides)});
    if (layout.ndim == 0) {  // one pair
      layout.ndim = 1;
      layout.sizes[0] = 1;
      for (int k = 0; k < kOperands; ++k) layout.strides[0][k] = 1;
    }
    scalar_t* y = out.mutable_data_ptr<scalar_t>();
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    const scalar_t* c = cos.const_data_ptr<scalar_t>();
    const scalar_t* s = sin.const_data_ptr<scalar_t>();
    const int64_t out_half = half * out.stride(-1), x_half = half * x.stride(-1);
    const c10::DeviceIndex device = out.device().index();
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device);
    constexpr int W = kVectorWidth<scalar_t>;
    const std::array<const void*, kOperands> ptrs{y, xp, c, s};
    if (out_half % W == 0 && x_half % W == 0 && as_vectors<scalar_t, kOperands>(layout, ptrs))
      launch_rotary<scalar_t, W>(device, stream, layout, y, xp, c, s, out_half, x_half);
    else
      launch_rotary<scalar_t, 1>(device, stream, layout, y, xp, c, s, out_half, x_half);
  });
}

}  // namespace backplane::cuda

BACKPLANE_KERNEL(CUDA, rotary, backplane::cuda::rotary)
