// Defining one registry op in PyTorch: used for the core's own ops (library.cpp) and for
// the ops of plugins' registry fragments (vendor_ops.cpp), so both get the same things.
#pragma once

#include <backplane/registry.h>

#include <torch/library.h>

namespace backplane::detail {

// The schema (tagged pt2_compliant), a Meta kernel from the op's shape rule (so
// FakeTensor, torch.compile, torch.export and AOTInductor need no Python fake
// registration), the Autograd kernel and the Autocast kernels. `library` is a DEF or
// FRAGMENT library of the op's namespace.
void define_op(torch::Library& library, const OpDef& op);

}  // namespace backplane::detail
