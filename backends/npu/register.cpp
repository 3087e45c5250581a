// Registers the npu kernels for every registry op on the PrivateUse1 dispatch key.
// Registration only: the kernels live in kernels/, one file per op. The schemas are
// defined once, by the core; this plugin never uses TORCH_LIBRARY.
#include "kernels/ops.h"

#include <torch/library.h>

TORCH_LIBRARY_IMPL(backplane, PrivateUse1, m) {
  m.impl("identity_conv", &backplane::npu::identity_conv);
  m.impl("add", &backplane::npu::add);
  m.impl("scale_", &backplane::npu::scale_);
  m.impl("sin_out", &backplane::npu::sin_out);
  m.impl("crop", &backplane::npu::crop);
  m.impl("rms_norm", &backplane::npu::rms_norm);
}
