// The Autograd kernel every registry op gets until it has a derivative (no_derivative.cpp).
#pragma once

#include <torch/library.h>

#include <string>

namespace backplane::detail {

// Registers, for `op` in `library`'s namespace, an Autograd kernel that runs the forward,
// and makes backward through it an error naming the op and the inputs wanting a gradient.
void register_no_derivative(torch::Library& library, const std::string& op);

}  // namespace backplane::detail
