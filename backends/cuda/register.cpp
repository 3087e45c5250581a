// Registers the CUDA kernels for every registry op on the CUDA dispatch key.
// Registration only: the kernels live in kernels/, one file per op. The schemas are
// defined once, by the core; this plugin never uses TORCH_LIBRARY.
#include "kernels/ops.h"

#include <torch/library.h>

TORCH_LIBRARY_IMPL(backplane, CUDA, m) {
  m.impl("identity_conv", &backplane::cuda::identity_conv);
  m.impl("add", &backplane::cuda::add);
  m.impl("scale_", &backplane::cuda::scale_);
  m.impl("sin_out", &backplane::cuda::sin_out);
  m.impl("crop", &backplane::cuda::crop);
  m.impl("rms_norm", &backplane::cuda::rms_norm);
}
