// softmax over the last dimension: max, then exp(x - max) with its sum in one pass, then a
// scale, per row, in opmath (float for float16 and bfloat16, else the dtype) with at::vec's
// vectorized exp. Rows run in parallel. A non-contiguous x is made contiguous first
// (one copy). A zero-dimensional x is one row of one element.
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

// out = exp(in - max), returning its sum: one pass (in may be out).
template <typename acc_t>
acc_t exp_and_sum(const acc_t* in, acc_t* out, int64_t n, acc_t max) {
  using Vec = Vectorized<acc_t>;
  Vec sums(acc_t(0));
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    const Vec e = (Vec::loadu(in + i) - Vec(max)).exp();
    e.store(out + i);
    sums = sums + e;
  }
  acc_t sum = at::vec::vec_reduce_all<acc_t>([](Vec& a, Vec& b) { return a + b; }, sums);
  for (; i < n; ++i) {
    out[i] = std::exp(in[i] - max);
    sum += out[i];
  }
  return sum;
}

// Three passes over a row, as aten's: max, exp with its sum, scale. (Five, with a copy and a
// separate sum pass, ran well behind aten: see bench/results/.)
template <typename acc_t>
void softmax_row(const acc_t* in, acc_t* out, int64_t n) {
  using Vec = Vectorized<acc_t>;
  const acc_t max = at::vec::reduce_all<acc_t>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, in, n);
  const acc_t inv = acc_t(1) / exp_and_sum(in, out, n, max);
  at::vec::map([inv](Vec v) { return v * Vec(inv); }, out, out, n);
}

template <typename scalar_t>
void softmax_rows(const scalar_t* x, scalar_t* y, int64_t rows, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / n), [&](int64_t begin, int64_t end) {
    std::vector<acc_t> buffer(std::is_same_v<scalar_t, acc_t> ? 0 : n);
    for (int64_t r = begin; r < end; ++r) {
      if constexpr (std::is_same_v<scalar_t, acc_t>) {
        softmax_row(x + r * n, y + r * n, n);
      } else {
        at::vec::convert(x + r * n, buffer.data(), n);
        softmax_row(buffer.data(), buffer.data(), n);
        at::vec::convert(buffer.data(), y + r * n, n);
      }
    }
  });
}

}  // namespace

void softmax(at::Tensor& out, const at::Tensor& x) {
  const at::Tensor xc = x.contiguous();
  const int64_t n = x.dim() == 0 ? 1 : x.size(-1);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_softmax", [&] {
    softmax_rows(xc.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), xc.numel() / n, n);
  });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX512 build on an AVX512 processor (kernel_variants.h): compute-bound (an exp per element),
// so it runs faster than the AVX2 build in float32 and bfloat16 (see bench/results/).
BACKPLANE_CPU_KERNEL_AVX512(softmax, softmax)
