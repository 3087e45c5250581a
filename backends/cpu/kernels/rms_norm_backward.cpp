// rms_norm_backward: with r = 1 / sqrt(mean(x^2) + eps) per row,
//   dx = r * grad * w - x * r^3 * mean(grad * w * x)
//   dweight = sum over rows of grad * x * r
// Each row's two sums in one pass, dx in a second pass over the same (cached) row. The
// row sums and dweight's sums are in double, every dtype: a row's sums run one element
// after another (strict floating point keeps the compiler from splitting them), where a
// float sum of 4096 squares is off by about 1e-6 relative, and dweight adds a term per
// row. At 8192x4096 float32, float sums (dweight in chunks of 256 rows) missed the float64
// reference by up to 1.7e-4, beyond the registry's float32 tolerance where |dweight| < 0.7
// (backplane bench caught it); double sums by 6e-6, at some cost in speed (see
// bench/results/). Rows are split into chunks of at most kChunkRows, at least one
// per thread; each chunk sums its dweight in its own row of doubles, and aten's sum adds
// the chunks (pairwise) in a fixed order, so results do not depend on timing. Rows of x
// and grad may have any leading strides (RowIndexer); a row that is not unit-stride is
// read through a contiguous copy.
#include "../kernel_variants.h"
#include "row_indexer.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace backplane::cpu::CPU_CAPABILITY {
namespace {

template <typename scalar_t>
void backward_rows(at::Tensor& dx, at::Tensor& dweight, const at::Tensor& grad, const at::Tensor& x,
                   const at::Tensor& weight, double eps) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t n = x.size(-1);
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  const at::Tensor w = weight.to(c10::CppTypeToScalarType<acc_t>::value).contiguous();
  const acc_t* w_data = w.const_data_ptr<acc_t>();
  const RowIndexer rows_of_x(x), rows_of_grad(grad);
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  const scalar_t* g_data = grad.const_data_ptr<scalar_t>();
  scalar_t* dx_data = dx.mutable_data_ptr<scalar_t>();

  constexpr int64_t kChunkRows = 256;
  const int64_t per_thread = (rows + at::get_num_threads() - 1) / at::get_num_threads();
  const int64_t chunk_rows = std::clamp<int64_t>(per_thread, 1, kChunkRows);
  const int64_t chunks = std::max<int64_t>(1, (rows + chunk_rows - 1) / chunk_rows);
  const at::Tensor partial = at::zeros({chunks, n}, w.options().dtype(at::kDouble));
  double* partial_data = partial.mutable_data_ptr<double>();
  at::parallel_for(0, chunks, 1, [&](int64_t first_chunk, int64_t end_chunk) {
    std::vector<acc_t> xr(n), gr(n);  // the row in opmath
    for (int64_t c = first_chunk; c < end_chunk; ++c) {
      double* dw = partial_data + c * n;
      for (int64_t r = c * chunk_rows; r < std::min(rows, (c + 1) * chunk_rows); ++r) {
        const scalar_t* xs = x_data + rows_of_x.offset(r);
        const scalar_t* gs = g_data + rows_of_grad.offset(r);
        const int64_t xstep = x.stride(-1), gstep = grad.stride(-1);
        double squares = 0, dot = 0;
        for (int64_t i = 0; i < n; ++i) {
          xr[i] = static_cast<acc_t>(xs[i * xstep]);
          gr[i] = static_cast<acc_t>(gs[i * gstep]);
          squares += static_cast<double>(xr[i]) * xr[i];
          dot += static_cast<double>(gr[i] * w_data[i]) * xr[i];
        }
        const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(n) + eps);
        const auto rstd_acc = static_cast<acc_t>(rstd);
        const auto c3 = static_cast<acc_t>(rstd * rstd * rstd * dot / static_cast<double>(n));
        scalar_t* out = dx_data + r * n;
        for (int64_t i = 0; i < n; ++i) {
          out[i] = static_cast<scalar_t>(rstd_acc * gr[i] * w_data[i] - xr[i] * c3);
          dw[i] += static_cast<double>(gr[i] * xr[i]) * rstd;
        }
      }
    }
  });
  // Chunks added in order: the same sums on every run.
  dweight.copy_(partial.sum(0));
}

}  // namespace

void rms_norm_backward(at::Tensor& dx, at::Tensor& dweight, const at::Tensor& grad, const at::Tensor& x,
                       const at::Tensor& weight, double eps) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "backplane_rms_norm_backward",
                                  [&] { backward_rows<scalar_t>(dx, dweight, grad, x, weight, eps); });
}

}  // namespace backplane::cpu::CPU_CAPABILITY

// AVX512 build on an AVX512 processor (kernel_variants.h): faster than the AVX2 build in float32
// and bfloat16, as measured before the sums moved to double (see bench/results/).
BACKPLANE_CPU_KERNEL_AVX512(rms_norm_backward, rms_norm_backward)
