// rotary: each pair (x[..., i], x[..., i + D/2]) rotated by cos/sin[..., i], in opmath
// (float for float16 and bfloat16), rounded once. One thread item is one pair of the
// halved shape [..., D/2]; the thread writes both halves of its pair, so x is read once
// and out written once. Offsets come from one OffsetCalculator over four operands (the
// first halves of out and x, cos, sin); the second halves sit D/2 * stride(-1) further on.
// x may be any view (q or k sliced from a fused qkv tensor, transposed heads): it is read
// in place. When every operand's innermost dimension is unit-stride whole 16-byte vectors
// and all six addresses are aligned (contiguous or head-sliced x with D/2 a multiple of
// the vector width), an item is a 16-byte vector per operand.
// As the strided elementwise kernel: a thread takes kUnroll (or 2) items, all their loads
// issued before the first store, and a block takes one tile of them: this keeps up with
// copy_, where a grid of resident blocks looping one item at a time fell behind (see
// bench/results/).
#include "dependent_launch.cuh"
#include "elementwise.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <array>

namespace backplane::cuda {
namespace {

constexpr int kOperands = 4;  // out (first half), x (first half), cos, sin

// Items a thread takes: kItemsPerThread (elementwise.cuh), 2 where an item widens past 16
// bytes of opmath. With 4, nvcc converts every loaded value up front and needs 157
// registers for bfloat16 (one block per multiprocessor, far behind copy_). Those items
// also ask for 3 resident blocks (at most 85 registers): bfloat16 then spills 16 bytes
// and still runs faster than at 92 registers and 2 blocks (see bench/results/).
template <typename scalar_t, int W>
constexpr int kMinBlocks = kWidens<scalar_t, W> ? 3 : 1;

template <typename scalar_t, int W, typename index_t>
__global__ void __launch_bounds__(kBlockThreads, kMinBlocks<scalar_t, W>)
    rotary_kernel(LaunchControl launch, scalar_t* out, const scalar_t* x, const scalar_t* cos, const scalar_t* sin,
                  int64_t out_half, int64_t x_half, OffsetCalculator<kOperands, index_t> calc, index_t n) {
  begin_after_previous_grid(launch);
  using opmath_t = at::opmath_type<scalar_t>;
  using item_t = Vector<scalar_t, W>;
  auto* y1 = reinterpret_cast<item_t*>(out);
  auto* y2 = reinterpret_cast<item_t*>(out + out_half);
  const auto* x1 = reinterpret_cast<const item_t*>(x);
  const auto* x2 = reinterpret_cast<const item_t*>(x + x_half);
  const auto* c = reinterpret_cast<const item_t*>(cos);
  const auto* s = reinterpret_cast<const item_t*>(sin);
  constexpr int U = kItemsPerThread<scalar_t, W>;
  constexpr index_t kTile = static_cast<index_t>(kBlockThreads) * U;
  const index_t step = static_cast<index_t>(gridDim.x) * kTile;
  for (index_t base = static_cast<index_t>(blockIdx.x) * kTile; base < n; base += step) {
    item_t a[U], b[U], cv[U], sv[U];
    index_t out_offset[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const index_t i = base + static_cast<index_t>(u * kBlockThreads) + threadIdx.x;
      if (i < n) {
        const auto offsets = calc.get(i);
        out_offset[u] = offsets[0];
        a[u] = x1[offsets[1]];
        b[u] = x2[offsets[1]];
        cv[u] = c[offsets[2]];
        sv[u] = s[offsets[3]];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const index_t i = base + static_cast<index_t>(u * kBlockThreads) + threadIdx.x;
      if (i >= n) continue;
      item_t r1, r2;
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const opmath_t p = a[u].v[e], q = b[u].v[e], ce = cv[u].v[e], se = sv[u].v[e];
        r1.v[e] = static_cast<scalar_t>(p * ce - q * se);
        r2.v[e] = static_cast<scalar_t>(q * ce + p * se);
      }
      y1[out_offset[u]] = r1;
      y2[out_offset[u]] = r2;
    }
  }
}

template <typename scalar_t, int W>
void launch_rotary(cudaStream_t stream, const StridedLayout<kOperands>& layout, scalar_t* out, const scalar_t* x,
                   const scalar_t* cos, const scalar_t* sin, int64_t out_half, int64_t x_half) {
  const int64_t n = layout.numel();
  const int64_t grid = blocks_for(n, kBlockThreads * kItemsPerThread<scalar_t, W>, kMaxGridBlocks);
  if (layout.fits_32bit()) {
    launch_kernel(rotary_kernel<scalar_t, W, unsigned int>, static_cast<unsigned>(grid), kBlockThreads, stream, out, x,
                  cos, sin, out_half, x_half, OffsetCalculator<kOperands, unsigned int>(layout),
                  static_cast<unsigned int>(n));
  } else {
    launch_kernel(rotary_kernel<scalar_t, W, int64_t>, static_cast<unsigned>(grid), kBlockThreads, stream, out, x, cos,
                  sin, out_half, x_half, OffsetCalculator<kOperands, int64_t>(layout), n);
  }
}

}  // namespace

namespace kernels {  // registered by rotary.cpp

void rotary(at::TensorBase& out, const at::TensorBase& x, const at::TensorBase& cos, const at::TensorBase& sin) {
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
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream(out.device().index());
    constexpr int W = kVectorWidth<scalar_t>;
    const std::array<const void*, kOperands> ptrs{y, xp, c, s};
    if (out_half % W == 0 && x_half % W == 0 && as_vectors<scalar_t, kOperands>(layout, ptrs))
      launch_rotary<scalar_t, W>(stream, layout, y, xp, c, s, out_half, x_half);
    else
      launch_rotary<scalar_t, 1>(stream, layout, y, xp, c, s, out_half, x_half);
  });
}

}  // namespace kernels
}  // namespace backplane::cuda
