// fill_ and zero_: queued on the current stream, like any kernel.
#include "device/launch.h"
#include "ops.h"

namespace backplane::npu {

at::Tensor& fill_(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  launch(self.device().index(), "aten::fill_", [self, value] { host_view(self).fill_(value); });
  return self;
}

at::Tensor& zero_(at::Tensor& self) { return fill_(self, 0); }

}  // namespace backplane::npu
