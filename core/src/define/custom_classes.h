// Registers the registry's custom classes (torch.classes.backplane.*); see custom_classes.cpp.
#pragma once

#include <backplane/registry.h>

#include <torch/library.h>

namespace backplane::detail {

// Called from the namespace's TORCH_LIBRARY block, after the ops are defined.
void define_classes(torch::Library& m, const Registry& registry);

}  // namespace backplane::detail
