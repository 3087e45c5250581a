// Registers the CPU kernels for every registry op. Registration only: the kernels
// live in kernels/, one file per op.
#include "capability.h"

#include <torch/library.h>

namespace {
const backplane::cpu::KernelTable& k = backplane::cpu::kernels_for(backplane::cpu::capability());
}  // namespace

TORCH_LIBRARY_IMPL(backplane, CPU, m) {
  m.impl("identity_conv", k.identity_conv);
  m.impl("add", k.add);
  m.impl("scale_", k.scale_);
  m.impl("sin_out", k.sin_out);
  m.impl("crop", k.crop);
  m.impl("rms_norm", k.rms_norm);
}
