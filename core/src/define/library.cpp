// The backplane namespace's only TORCH_LIBRARY block: every op of the core registry
// (op_definition.h) and its custom classes. Plugins' own ops live in their own
// namespaces (vendor_ops.h).
#include <backplane/registry.h>

#include "define/custom_classes.h"
#include "define/op_definition.h"

#include <torch/library.h>

namespace backplane {

TORCH_LIBRARY(backplane, m) {
  for (const OpDef& op : registry().ops()) detail::define_op(m, op);
  detail::define_classes(m, registry());
}

}  // namespace backplane
