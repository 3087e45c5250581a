// Row r of a tensor (an index over every dimension but the last, row-major) -> offset of
// its first element, for any strides of the leading dimensions (padded, offset and
// expanded rows need no copy). Shared by the row-wise kernels (rms_norm and its backward).
#pragma once

#include "strided_indexing.cuh"
#include "vector_access.cuh"

#include <ATen/core/TensorBase.h>

#include <cstdint>
#include <string_view>

namespace backplane::cuda {

// Once per row, so the general case loops without unrolling (64-bit
// division); rows that merge to one dimension (the usual case) take one multiply.
struct RowIndexer {
  explicit RowIndexer(const StridedLayout<1>& rows) : ndim(rows.ndim) {
    for (int d = 0; d < ndim; ++d) {
      sizes[d] = rows.sizes[d];
      strides[d] = rows.strides[d][0];
    }
  }
  __device__ __forceinline__ int64_t offset(int64_t r) const {
    if (ndim <= 1) return ndim == 0 ? 0 : r * strides[0];
    int64_t off = 0;
#pragma unroll 1
    for (int d = 0; d < ndim; ++d) {
      off += (r % sizes[d]) * strides[d];
      r /= sizes[d];
    }
    return off;
  }
  int ndim;
  int64_t sizes[kMaxDims];  // innermost first
  int64_t strides[kMaxDims];
};

// The rows of t (every dimension but the last) in their logical order.
inline StridedLayout<1> row_layout(std::string_view op, const at::TensorBase& t) {
  return make_layout<1>(op, t.sizes().slice(0, t.dim() - 1), {t.strides().slice(0, t.dim() - 1)}, /*reorder=*/false);
}

// Whether every row of t is whole unit-stride 16-byte vectors of scalar_t, each row
// starting 16-byte aligned.
template <typename scalar_t>
bool rows_are_vectors(const at::TensorBase& t, const StridedLayout<1>& rows) {
  constexpr int64_t V = kVectorWidth<scalar_t>;
  if (t.stride(-1) != 1 || t.size(-1) % V != 0 || !is_vector_aligned(t.const_data_ptr())) return false;
  for (int d = 0; d < rows.ndim; ++d)
    if (rows.strides[d][0] % V != 0) return false;
  return true;
}

}  // namespace backplane::cuda
