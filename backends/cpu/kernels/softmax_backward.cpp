// softmax_backward over the last dimension: per row, dot = sum(grad * y), then
// y * (grad - dot), in opmath (float for float16 and bfloat16, else the dtype) with
// at::vec. Rows run in parallel. Non-contiguous grad or y is made contiguous first (one
// copy each). A zero-dimensional y is one row of one element.
#include "../kernel_variants.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <vector>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

// out may be g (the reduced-precision path works in place in its buffers).
template <typename acc_t>
void backward_row(const acc_t* g, const acc_t* y, acc_t* out, int64_t n) {
  using Vec = Vectorized<acc_t>;
  const acc_t dot = at::vec::map2_reduce_all<acc_t>([](Vec a, Vec b) { return a * b; },
                                                    [](Vec a, Vec b) { return a + b; }, g, y, n);
  at::vec::map2([dot](Vec gv, Vec yv) { return yv * (gv - Vec(dot)); }, out, g, y, n);
}

template <typename scalar_t>
void backward_rows(const scalar_t* g, const scalar_t* y, scalar_t* out, int64_t rows, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / n), [&](int64_t begin, int64_t end) {
    constexpr bool kConvert = !std::is_same_v<scalar_t, acc_t>;
    std::vector<acc_t> gbuf(kConvert ? n : 0), ybuf(kConvert ? n : 0);
    for (int64_t r = begin; r < end; ++r) {
      if constexpr (kConvert) {
        at::vec::convert(g + r * n, gbuf.data(), n);
        at::vec::convert(y + r * n, ybuf.data(), n);
        backward_row(gbuf.data(), ybuf.data(), gbuf.data(), n);
        at::vec::convert(gbuf.data(), out + r * n, n);
      } else {
        backward_row(g + r * n, y + r * n, out + r * n, n);
      }
    }
  });
}

}  // namespace

void softmax_backward(at::Tensor& out, const at::Tensor& grad, const at::Tensor& y) {
  const at::Tensor gc = grad.contiguous(), yc = y.contiguous();
  const int64_t n = y.dim() == 0 ? 1 : y.size(-1);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "backplane_softmax_backward", [&] {
    backward_rows(gc.const_data_ptr<scalar_t>(), yc.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(),
                  yc.numel() / n, n);
  });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX512 build on an AVX512 processor (kernel_variants.h): faster than the AVX2 build in float32
// and bfloat16 (see bench/results/).
BACKPLANE_CPU_KERNEL_AVX512(softmax_backward, softmax_backward)
