#include "../kernel_variants.h"
#include "row_indexer.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <cmath>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;

template <typename scalar_t>
constexpr bool kReduced = !std::is_same_v<scalar_t, at::opmath_type<scalar_t>>;

// Sums of squares go in blocks: each block in opmath vector lanes, the blocks' sums in
// double. One opmath accumulator over a long row drops the small terms once it is large
// (a row with an outlier lost 5e-6 relative in float32; a 2^31-element bfloat16 row
// stopped growing at 2^26 and came out 11x too large); this bounds the error by one
// block's, as PyTorch's cascade sums do. Every index is 64-bit.
constexpr int64_t kSumBlock = 256;

// Sum of squares of up to kSumBlock contiguous elements, in opmath.
template <typename scalar_t>
at::opmath_type<scalar_t> sum_squares_block(const scalar_t* x, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  using aVec = Vectorized<acc_t>;
  constexpr int64_t L = Vectorized<scalar_t>::size();
  aVec acc0(0), acc1(0);
  int64_t i = 0;
  if constexpr (kReduced<scalar_t>) {
    for (; i + L <= n; i += L) {
      auto [a, b] = at::vec::convert_to_float<scalar_t>(Vectorized<scalar_t>::loadu(x + i));
      acc0 = at::vec::fmadd(a, a, acc0);
      acc1 = at::vec::fmadd(b, b, acc1);
    }
  } else {
    // Two accumulators: independent FMA chains keep both FMA units busy.
    for (; i + 2 * L <= n; i += 2 * L) {
      aVec a = aVec::loadu(x + i), b = aVec::loadu(x + i + L);
      acc0 = at::vec::fmadd(a, a, acc0);
      acc1 = at::vec::fmadd(b, b, acc1);
    }
    for (; i + L <= n; i += L) {
      aVec a = aVec::loadu(x + i);
      acc0 = at::vec::fmadd(a, a, acc0);
    }
  }
  acc_t sum = at::vec::vec_reduce_all<acc_t>([](aVec& p, aVec& q) { return p + q; }, acc0 + acc1);
  for (; i < n; ++i) {
    const acc_t v = static_cast<acc_t>(x[i]);
    sum += v * v;
  }
  return sum;
}

// Sum of squares of one contiguous row.
template <typename scalar_t>
double sum_squares(const scalar_t* x, int64_t n) {
  double total = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) total += sum_squares_block(x + b, std::min(kSumBlock, n - b));
  return total;
}

// The same along any stride (a transposed or expanded row).
template <typename scalar_t>
double sum_squares_strided(const scalar_t* x, int64_t stride, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  double total = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    acc_t block = 0;
    for (int64_t i = b, end = std::min(n, b + kSumBlock); i < end; ++i) {
      const acc_t v = static_cast<acc_t>(x[i * stride]);
      block += v * v;
    }
    total += block;
  }
  return total;
}

template <typename acc_t>
acc_t inverse_rms(double sum_squares, int64_t n, acc_t eps) {
  return static_cast<acc_t>(1.0 / std::sqrt(sum_squares / static_cast<double>(n) + static_cast<double>(eps)));
}

// y = x * inv * w for one contiguous row; w is already in opmath.
template <typename scalar_t>
void scale_row(const scalar_t* x, const at::opmath_type<scalar_t>* w, at::opmath_type<scalar_t> inv, scalar_t* y,
               int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  using aVec = Vectorized<acc_t>;
  constexpr int64_t L = Vectorized<scalar_t>::size();
  const aVec inv_v(inv);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    if constexpr (kReduced<scalar_t>) {
      auto [a, b] = at::vec::convert_to_float<scalar_t>(Vectorized<scalar_t>::loadu(x + i));
      a = a * inv_v * aVec::loadu(w + i);
      b = b * inv_v * aVec::loadu(w + i + aVec::size());
      at::vec::convert_from_float<scalar_t>(a, b).store(y + i);
    } else {
      (aVec::loadu(x + i) * inv_v * aVec::loadu(w + i)).store(y + i);
    }
  }
  for (; i < n; ++i) y[i] = static_cast<scalar_t>(static_cast<acc_t>(x[i]) * inv * w[i]);
}

// Any stride along the row (a transposed or expanded x): scalar, correct, not fast.
// The weight is read as it is (any stride, the dtype of x), not converted first.
template <typename scalar_t>
void norm_row_strided(const scalar_t* x, int64_t stride, const scalar_t* w, int64_t w_stride,
                      at::opmath_type<scalar_t> eps, scalar_t* y, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  const acc_t inv = inverse_rms(sum_squares_strided(x, stride, n), n, eps);
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<scalar_t>(static_cast<acc_t>(x[i * stride]) * inv * static_cast<acc_t>(w[i * w_stride]));
}

}  // namespace

void rms_norm(at::Tensor& out, const at::Tensor& x, const at::Tensor& weight, double eps) {
  const int64_t n = x.size(-1);
  const int64_t rows = x.numel() / n;
  const int64_t row_stride = x.stride(-1);
  const RowIndexer rows_of_x(x);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_rms_norm", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    // Rows along a stride (every row, or none) take the scalar path, which reads the
    // weight as it is: an expanded 2^31-element weight is then never materialized.
    // Contiguous rows take the weight in opmath, contiguous, converted once per call.
    const at::Tensor w =
        row_stride == 1 ? weight.to(c10::CppTypeToScalarType<acc_t>::value).contiguous() : at::Tensor();
    const acc_t* w_data = w.defined() ? w.const_data_ptr<acc_t>() : nullptr;
    const scalar_t* x_data = x.const_data_ptr<scalar_t>();
    scalar_t* y_data = out.mutable_data_ptr<scalar_t>();
    const acc_t eps_acc = static_cast<acc_t>(eps);
    // About 32K elements per task, ATen's grain size for elementwise loops.
    const int64_t grain = std::max<int64_t>(1, 32768 / n);
    at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const scalar_t* xr = x_data + rows_of_x.offset(r);
        scalar_t* yr = y_data + r * n;
        if (row_stride != 1) {
          norm_row_strided(xr, row_stride, weight.const_data_ptr<scalar_t>(), weight.stride(0), eps_acc, yr, n);
          continue;
        }
        const acc_t inv = inverse_rms(sum_squares(xr, n), n, eps_acc);
        scale_row(xr, w_data, inv, yr, n);
      }
    });
  });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX512 build on an AVX512 processor (kernel_variants.h): faster than the AVX2 build in float32
// and bfloat16 (see bench/results/).
BACKPLANE_CPU_KERNEL_AVX512(rms_norm, rms_norm)
