// rotary(x, cos, sin): x is [..., S, D] with D even; cos and sin have one shape, ending
// in D/2, that broadcasts to x's sizes with the last dimension halved (a [S, D/2] cache,
// or a per-batch [B, 1, S, D/2] one). The output is shaped like x.
#include "define/shape_rules/shape_rules.h"

#include <c10/util/Exception.h>

namespace backplane {
namespace {

std::vector<c10::SymInt> rotary_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& x = args[op.arg_index("x")].toTensor();
  const at::Tensor& cos = args[op.arg_index("cos")].toTensor();
  const at::Tensor& sin = args[op.arg_index("sin")].toTensor();
  TORCH_CHECK_VALUE(x.dim() >= 1, "backplane::rotary: x must have at least 1 dimension, found a 0-d tensor");
  const c10::SymInt D = x.sym_size(-1);
  TORCH_CHECK_VALUE((D % 2).sym_eq(0).expect_true(__FILE__, __LINE__),
                    "backplane::rotary: x's last dimension must be even (the two halves are rotated together), found ",
                    D);
  TORCH_CHECK_VALUE(cos.dim() == sin.dim() && cos.sym_sizes() == sin.sym_sizes(),
                    "backplane::rotary: cos and sin must have the same sizes, found ", cos.sym_sizes(), " and ",
                    sin.sym_sizes());
  const c10::SymInt half = D / 2;
  TORCH_CHECK_VALUE(cos.dim() >= 1 && cos.sym_size(-1).sym_eq(half).expect_true(__FILE__, __LINE__),
                    "backplane::rotary: cos and sin must have x's last dimension halved (", half,
                    ") as their last dimension, found cos of sizes ", cos.sym_sizes());
  std::vector<c10::SymInt> halved = x.sym_sizes().vec();
  halved.back() = half;
  // Each cache dimension, aligned from the right, is 1 or equal to x's.
  bool broadcasts = cos.dim() <= x.dim();
  for (int64_t d = 1; broadcasts && d <= cos.dim(); ++d) {
    const c10::SymInt& c = cos.sym_size(-d);
    broadcasts = c.sym_eq(1).expect_true(__FILE__, __LINE__) ||
                 c.sym_eq(halved[halved.size() - d]).expect_true(__FILE__, __LINE__);
  }
  TORCH_CHECK_VALUE(broadcasts, "backplane::rotary: cos of sizes ", cos.sym_sizes(), " does not broadcast to ",
                    c10::SymIntArrayRef(halved), " (x's sizes with the last dimension halved)");
  return x.sym_sizes().vec();
}

}  // namespace

BACKPLANE_SHAPE_RULE(rotary, rotary_shape);

}  // namespace backplane
