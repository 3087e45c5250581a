// The Autocast kernels every registry op gets (autocast_kernel.cpp).
#pragma once

#include <backplane/registry.h>

#include <torch/library.h>

namespace backplane::detail {

// Registers, for `op` in `library`'s namespace, a kernel on AutocastCPU, AutocastCUDA and
// AutocastPrivateUse1 that casts the op's floating Tensor inputs on that device as the
// op's `autocast:` rule says, then runs the op with autocast off for that device.
void register_autocast(torch::Library& library, const OpDef& op);

}  // namespace backplane::detail
