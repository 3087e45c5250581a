// Strided indexing: a linear element index becomes one element offset per operand,
// for any sizes and strides (slices, transposes, storage offsets, stride-0
// broadcasts), so kernels read views in place and never copy an input first.
//
// make_layout() drops size-1 dimensions, optionally orders the rest so the innermost
// has the smallest stride of the first operand (the output), and merges dimensions
// that are contiguous in every operand. A transposed tensor written in place thus
// becomes one unit-stride dimension, and a contiguous one always does.
#pragma once

#include <ATen/core/Array.h>
#include <c10/macros/Macros.h>
#include <ATen/cuda/detail/IntegerDivider.cuh>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string_view>

namespace backplane::cuda {

// Dimensions left after merging; ATen's own limit for CUDA elementwise kernels
// (MAX_DIMS), so a view aten accepts is accepted here too.
constexpr int kMaxDims = 25;

// N operands over one iteration shape. Strides are in elements, 0 for a broadcast
// dimension, never negative (PyTorch has no negative strides).
template <int N>
struct StridedLayout {
  int ndim = 0;
  int64_t sizes[kMaxDims];         // innermost first
  int64_t strides[kMaxDims][N];

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
  // One dimension of stride 1 in every operand: plain contiguous arrays.
  bool unit_stride() const {
    if (ndim != 1) return false;
    for (int k = 0; k < N; ++k)
      if (strides[0][k] != 1) return false;
    return true;
  }
  // Every linear index and every operand's offsets fit in 31 bits, so 32-bit
  // arithmetic (and IntDivider's fast division, which needs that) is exact.
  bool fits_32bit() const {
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    if (numel() > kMax) return false;
    for (int k = 0; k < N; ++k) {
      int64_t last = 0;
      for (int d = 0; d < ndim; ++d) last += (sizes[d] - 1) * strides[d][k];
      if (last > kMax) return false;
    }
    return true;
  }
};

// sizes: the iteration shape, outermost first (the output's sizes). strides[k]: the
// k-th operand's strides for exactly that shape, already broadcast. reorder = false
// keeps the logical order, for callers that map the linear index to an output
// position themselves (rms_norm's rows). Throws, naming `op`, past kMaxDims.
template <int N>
StridedLayout<N> make_layout(std::string_view op, c10::ArrayRef<int64_t> sizes,
                             const std::array<c10::ArrayRef<int64_t>, N>& strides, bool reorder = true) {
  struct Dim {
    int64_t size;
    std::array<int64_t, N> stride;
  };
  c10::SmallVector<Dim, 8> dims;  // innermost first
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    Dim dim{sizes[d], {}};
    for (int k = 0; k < N; ++k) dim.stride[k] = strides[k][d];
    dims.push_back(dim);
  }
  if (reorder) {
    // Stable insertion sort: a dimension moves inward past one with a larger stride in
    // the first operand that tells them apart (stride-0 broadcasts tell nothing).
    auto inner_than = [](const Dim& a, const Dim& b) {
      for (int k = 0; k < N; ++k) {
        const int64_t sa = a.stride[k], sb = b.stride[k];
        if (sa == sb || sa == 0 || sb == 0) continue;
        return sa < sb;
      }
      return false;
    };
    for (size_t i = 1; i < dims.size(); ++i)
      for (size_t j = i; j > 0 && inner_than(dims[j], dims[j - 1]); --j) std::swap(dims[j], dims[j - 1]);
  }
  StridedLayout<N> layout;
  int n = 0;
  for (const Dim& dim : dims) {
    bool merges = n > 0;
    for (int k = 0; merges && k < N; ++k)
      merges = dim.stride[k] == layout.strides[n - 1][k] * layout.sizes[n - 1];
    if (merges) {
      layout.sizes[n - 1] *= dim.size;
      continue;
    }
    TORCH_CHECK(n < kMaxDims, op, ": the CUDA kernel supports at most ", kMaxDims,
                " non-contiguous dimensions, found a view with more (sizes ", sizes, ")");
    layout.sizes[n] = dim.size;
    for (int k = 0; k < N; ++k) layout.strides[n][k] = dim.stride[k];
    ++n;
  }
  layout.ndim = n;
  return layout;
}

// Device side of a one-dimensional layout (a contiguous or sliced view merges to one):
// offset k of linear index i is i * stride k, no division. 32-bit (the caller checks
// layout.fits_32bit()).
template <int N>
struct LinearOffsets {
  using index_t = unsigned int;
  using Offsets = at::detail::Array<index_t, N>;

  explicit LinearOffsets(const StridedLayout<N>& layout) {
    TORCH_INTERNAL_ASSERT(layout.ndim == 1 && layout.fits_32bit(),
                          "LinearOffsets takes a one-dimensional, 32-bit layout");
    for (int k = 0; k < N; ++k) strides[k] = static_cast<index_t>(layout.strides[0][k]);
  }

  __device__ __forceinline__ Offsets get(index_t linear) const {
    Offsets offsets;
#pragma unroll
    for (int k = 0; k < N; ++k) offsets[k] = linear * strides[k];
    return offsets;
  }

  index_t strides[N];
};

// Device side of a layout: linear index -> N element offsets. index_t is unsigned int
// when layout.fits_32bit() (division by magic-number multiplication), else int64_t
// (hardware-emulated 64-bit division: correct for any size, several times slower).
template <int N, typename index_type>
struct OffsetCalculator {
  using index_t = index_type;
  using Offsets = at::detail::Array<index_t, N>;

  explicit OffsetCalculator(const StridedLayout<N>& layout) : ndim(layout.ndim) {
    for (int d = 0; d < ndim; ++d) {
      sizes[d] = at::cuda::detail::IntDivider<index_t>(static_cast<index_t>(layout.sizes[d]));
      for (int k = 0; k < N; ++k) strides[d][k] = static_cast<index_t>(layout.strides[d][k]);
    }
  }

  __device__ __forceinline__ Offsets get(index_t linear) const {
    Offsets offsets(index_t(0));
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      index_t i = linear;
      if (d < ndim - 1) {  // the outermost index is what is left: no division
        const auto qr = sizes[d].divmod(linear);
        i = qr.mod;
        linear = qr.div;
      }
#pragma unroll
      for (int k = 0; k < N; ++k) offsets[k] += i * strides[d][k];
    }
    return offsets;
  }

  int ndim;
  at::cuda::detail::IntDivider<index_t> sizes[kMaxDims];
  index_t strides[kMaxDims][N];
};

}  // namespace backplane::cuda
