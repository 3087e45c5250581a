// The Autograd kernel every registry op gets (autograd_kernel.cpp).
#pragma once

#include <backplane/registry.h>

#include <torch/library.h>

namespace backplane::detail {

// Registers, for `op` in `library`'s namespace, an Autograd kernel that runs the forward
// and records a node: the op's `backward:` formulas (formula_backward.h) where every
// input wanting a gradient has one, else a node whose backward is an error naming the op
// and those inputs.
void register_autograd(torch::Library& library, const OpDef& op);

}  // namespace backplane::detail
