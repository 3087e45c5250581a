// Element offset of row r of a tensor (r indexes every dimension but the last), for
// any strides of the leading dimensions: padded, offset and expanded rows need no copy.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace backplane::cpu::CPU_CAPABILITY {

class RowIndexer {
 public:
  explicit RowIndexer(const at::Tensor& t)
      : sizes_(t.sizes().begin(), t.sizes().end() - 1), strides_(t.strides().begin(), t.strides().end() - 1) {}
  int64_t offset(int64_t r) const {
    int64_t off = 0;
    for (int64_t d = static_cast<int64_t>(sizes_.size()) - 1; d >= 0; --d) {
      off += (r % sizes_[d]) * strides_[d];
      r /= sizes_[d];
    }
    return off;
  }

 private:
  std::vector<int64_t> sizes_, strides_;
};

}  // namespace backplane::cpu::CPU_CAPABILITY
