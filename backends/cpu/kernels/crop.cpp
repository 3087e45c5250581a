#include "../kernel_variants.h"
#include "copy_loop.h"
#include "row_indexer.h"

#include <ATen/TensorIterator.h>

namespace backplane::cpu::CPU_CAPABILITY {

// The window is a strided view of img; the copy reads it in place (no intermediate).
// Rows with unit stride are copied with memcpy, in parallel; any other layout goes
// through a TensorIterator.
void crop(at::Tensor& out, const at::Tensor& img, at::IntArrayRef box) {
  const at::Tensor window = img.slice(-2, box[0], box[0] + box[2]).slice(-1, box[1], box[1] + box[3]);
  if (window.stride(-1) == 1) {
    const int64_t width = window.size(-1), rows = window.numel() / width;
    const int64_t row_bytes = width * static_cast<int64_t>(window.element_size());
    const RowIndexer rows_of(window);
    const char* src = static_cast<const char*>(window.const_data_ptr());
    char* dst = static_cast<char*>(out.mutable_data_ptr());
    const int64_t item = window.element_size();
    at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / width), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) std::memcpy(dst + r * row_bytes, src + rows_of.offset(r) * item, row_bytes);
    });
    return;
  }
  // `out` is new (the op contract allocated it): it overlaps no input, so the check is skipped.
  auto iter =
      at::TensorIteratorConfig().set_check_mem_overlap(false).add_output(out).add_const_input(window).build();
  copy_loop(iter);
}

}  // namespace backplane::cpu::CPU_CAPABILITY

BACKPLANE_CPU_KERNEL(crop, crop)
