// softmax_backward(grad, y): grad must have the sizes of y (softmax's output); so has
// the result. Zero-dimensional y is allowed, as softmax allows a zero-dimensional x.
#include "define/shape_rules/shape_rules.h"

#include <c10/util/Exception.h>

namespace backplane {
namespace {

std::vector<c10::SymInt> softmax_backward_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& grad = args[op.arg_index("grad")].toTensor();
  const at::Tensor& y = args[op.arg_index("y")].toTensor();
  TORCH_CHECK_VALUE(same_sizes(grad, y), op.qualified_name(), ": grad must have y's sizes ", y.sym_sizes(), ", found ", grad.sym_sizes());
  return y.sym_sizes().vec();
}

}  // namespace

BACKPLANE_SHAPE_RULE(softmax_backward, softmax_backward_shape);

}  // namespace backplane
