// Hand-written shape rules that the registry names with {custom: name}: the escape
// hatch for shapes the closed set of rules cannot say. Each checks the op's
// arguments beyond dtype and device, and returns the output sizes. A rule is one file
// in this folder that ends in BACKPLANE_SHAPE_RULE(name, fn): nothing else names it
// (the table of names is registry/custom_shape_rules.h, which the registry's readers check).
#pragma once

#include "registry/custom_shape_rules.h"

#include <ATen/core/Tensor.h>

namespace backplane {

// Whether a and b have the same sizes (symbolically: a dynamic dimension stays dynamic).
bool same_sizes(const at::Tensor& a, const at::Tensor& b);

}  // namespace backplane
