// Helpers the custom shape rules share; their table is registry/custom_shape_rules.cpp.
#include "define/shape_rules/shape_rules.h"

namespace backplane {

bool same_sizes(const at::Tensor& a, const at::Tensor& b) {
  bool same = a.dim() == b.dim();
  for (int64_t d = 0; same && d < a.dim(); ++d) same = a.sym_size(d).sym_eq(b.sym_size(d)).expect_true(__FILE__, __LINE__);
  return same;
}

}  // namespace backplane
