// The least bytes a read of a tensor moves: each distinct element once. An expanded
// (stride-0) dimension names one element however long it is, so an expanded input of
// [4096, 4096] from one row reads one row, not 16M elements.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace backplane::bench {

inline int64_t distinct_bytes(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t elements = 1;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) != 0) elements *= t.size(d);
  return elements * static_cast<int64_t>(t.element_size());
}

}  // namespace backplane::bench
