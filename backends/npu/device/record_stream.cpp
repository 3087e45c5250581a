// Tensor.record_stream for npu tensors: marks the tensor's memory as used by work queued on
// another stream, so the caching allocator does not reuse it before that work has run
// (caching_allocator.h). Without this kernel the call fell through to the CPU fallback,
// which cannot take a Stream argument.
#include "device/caching_allocator.h"
#include "device/npu_stream.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace backplane::npu {
namespace {

void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNpu, "backplane npu: record_stream expects an npu stream, got one on ",
              stream.device());
  caching::record_stream(self.storage().data_ptr().get(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", &record_stream); }

}  // namespace backplane::npu
