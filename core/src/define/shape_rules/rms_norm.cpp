// rms_norm(x, weight, eps): weight is 1-D and as long as x's last dimension; x has
// at least one dimension; eps is finite and >= 0. The output is shaped like x.
// rms_norm_backward(grad, x, weight, eps): the same, and grad shaped like x; dx is
// shaped like x (this rule), dweight like weight (the registry's second rule).
#include "define/shape_rules/shape_rules.h"

#include <c10/util/Exception.h>

#include <cmath>

namespace backplane {
namespace {

std::vector<c10::SymInt> rms_norm_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& x = args[op.arg_index("x")].toTensor();
  const at::Tensor& weight = args[op.arg_index("weight")].toTensor();
  const double eps = args[op.arg_index("eps")].toDouble();
  // op.qualified_name() only inside the checks: their messages are built on failure alone
  // (this runs on every call).
  TORCH_CHECK_VALUE(x.dim() >= 1, op.qualified_name(), ": x must have at least 1 dimension, found a 0-d tensor");
  TORCH_CHECK_VALUE(weight.dim() == 1 && weight.sym_size(0).sym_eq(x.sym_size(-1)).expect_true(__FILE__, __LINE__),
                    op.qualified_name(), ": weight must have sizes [", x.sym_size(-1), "] (x's last dimension), found ",
                    weight.sym_sizes());
  TORCH_CHECK_VALUE(std::isfinite(eps) && eps >= 0, op.qualified_name(), ": eps must be finite and >= 0, found ", eps);
  return x.sym_sizes().vec();
}

std::vector<c10::SymInt> rms_norm_backward_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& grad = args[op.arg_index("grad")].toTensor();
  const at::Tensor& x = args[op.arg_index("x")].toTensor();
  TORCH_CHECK_VALUE(same_sizes(grad, x), op.qualified_name(), ": grad must have x's sizes ", x.sym_sizes(), ", found ",
                    grad.sym_sizes());
  return rms_norm_shape(op, args);
}

}  // namespace

BACKPLANE_SHAPE_RULE(rms_norm, rms_norm_shape);
BACKPLANE_SHAPE_RULE(rms_norm_backward, rms_norm_backward_shape);

}  // namespace backplane
