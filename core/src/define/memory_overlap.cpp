#include "define/memory_overlap.h"

#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace backplane::detail {
namespace {

// Every element's offset in its storage, in index order.
std::vector<int64_t> element_offsets(const at::Tensor& t) {
  std::vector<int64_t> offsets{t.storage_offset()};
  offsets.reserve(static_cast<size_t>(t.numel()));
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const size_t before = offsets.size();
    for (int64_t i = 1; i < t.size(d); ++i)
      for (size_t k = 0; k < before; ++k) offsets.push_back(offsets[k] + i * t.stride(d));
  }
  return offsets;
}

// The highest offset above storage_offset that t reaches (strides are >= 0 in torch).
int64_t reach(const at::Tensor& t) {
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return last;
}

}  // namespace

Overlap internal_overlap(const at::Tensor& t) {
  if (t.numel() <= 1 || t.is_non_overlapping_and_dense()) return Overlap::No;  // the usual case, no allocation
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of each dimension that moves
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 1) continue;
    if (t.stride(d) == 0) return Overlap::Yes;
    dims.emplace_back(t.stride(d), t.size(d));
  }
  // Strides in increasing order, each past everything the smaller ones reach: no two
  // indices meet. Contiguous, transposed, sliced and permuted views all pass here.
  std::sort(dims.begin(), dims.end());
  int64_t reached = 0;
  bool clear = true;
  for (const auto& [stride, size] : dims) {
    if (stride <= reached) {
      clear = false;
      break;
    }
    reached += stride * (size - 1);
  }
  if (clear) return Overlap::No;
  if (t.numel() > kMaxListedElements) return Overlap::Unknown;
  std::vector<int64_t> offsets = element_offsets(t);
  std::sort(offsets.begin(), offsets.end());
  return std::adjacent_find(offsets.begin(), offsets.end()) != offsets.end() ? Overlap::Yes : Overlap::No;
}

Overlap partial_overlap(const at::Tensor& a, const at::Tensor& b) {
  const at::MemOverlapStatus status = at::get_overlap_status(a, b);
  if (status == at::MemOverlapStatus::No || status == at::MemOverlapStatus::Full) return Overlap::No;
  if (status == at::MemOverlapStatus::Partial) return Overlap::Yes;
  if (!a.storage().is_alias_of(b.storage())) return Overlap::No;
  if (a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() && a.strides() == b.strides())
    return Overlap::No;  // the same view twice
  if (a.numel() == 0 || b.numel() == 0) return Overlap::No;
  const int64_t a_begin = a.storage_offset(), b_begin = b.storage_offset();
  if (a_begin + reach(a) < b_begin || b_begin + reach(b) < a_begin) return Overlap::No;  // disjoint ranges
  // Interleaved ranges (the two halves of t[::2] and t[1::2]): list the elements.
  if (a.numel() + b.numel() > kMaxListedElements) return Overlap::Unknown;
  std::vector<int64_t> in_a = element_offsets(a), in_b = element_offsets(b);
  std::sort(in_a.begin(), in_a.end());
  std::sort(in_b.begin(), in_b.end());
  std::vector<int64_t> common;
  std::set_intersection(in_a.begin(), in_a.end(), in_b.begin(), in_b.end(), std::back_inserter(common));
  return common.empty() ? Overlap::No : Overlap::Yes;
}

}  // namespace backplane::detail
