// Whether a tensor that an op writes shares memory with itself or with an input, exactly
// where that can be known cheaply. PyTorch's own helpers (at::has_internal_overlap,
// at::get_overlap_status) answer "too hard" for every non-dense view, and PyTorch then
// lets the write go ahead; a written tensor two of whose indices reach one element
// (as_strided((4, 3), (1, 1))) would compound silently, so Backplane decides instead.
#pragma once

#include <ATen/core/Tensor.h>

namespace backplane::detail {

enum class Overlap { No, Yes, Unknown };  // Unknown: too many elements to list

// Elements listed at most, when the layout is not one whose strides clear each other
// (the layouts PyTorch makes always are): 4M offsets, 32 MB, in a rare case.
constexpr int64_t kMaxListedElements = int64_t{1} << 22;

// Two indices of t reach one element.
Overlap internal_overlap(const at::Tensor& t);

// a and b (same dtype) share an element without being the same view: anything but "no
// common element" or "the same elements in the same layout", which kernels handle.
Overlap partial_overlap(const at::Tensor& a, const at::Tensor& b);

}  // namespace backplane::detail
