// Forward-mode AD (torch.autograd.forward_ad, torch.func.jvp) for registry ops.
//
// The tangents come from the op's `reference:` in the registry: the reference is evaluated
// through PyTorch's own ops on the op's inputs, tangents included, and the tangent of what
// it gives becomes the tangent of the op's output (or of the argument the op writes). So
// every op with a reference has forward-mode AD that agrees with the definition the
// conformance suite checks its kernels against, at the cost of evaluating the reference
// once more (in the op's dtype, on its device) whenever a tangent is present. An op without
// a reference refuses forward-mode AD with an error naming it: a tangent is never dropped
// (a dropped tangent reads as zero).
// Limits: PyTorch's one forward-AD level (0) is the only one read, as PyTorch's own
// kernels do; the reference's ATen ops must have forward derivatives (PyTorch names any
// that does not).
#pragma once

#include "formula/reference_expr.h"
#include <backplane/registry.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <vector>

namespace backplane::detail {

class ForwardTangents {
 public:
  explicit ForwardTangents(const OpDef& op);

  // Whether a Tensor argument among the last `n` stack entries carries a tangent.
  static bool any_tangent(const torch::jit::Stack& stack, size_t n);

  // Before the kernel runs (an argument the op writes still holds its old value): the
  // tangent of each value the reference gives; undefined where it has none.
  std::vector<at::Tensor> compute(const c10::FunctionSchema& schema, const torch::jit::Stack& stack) const;

  // After the kernel: gives the outputs, or `written` (the argument the op wrote), those
  // tangents. A written argument whose new value has none loses its old one (zeroed).
  void attach(const c10::FunctionSchema& schema, torch::jit::Stack& stack, const at::Tensor& written,
              const std::vector<at::Tensor>& tangents) const;

 private:
  const OpDef& op_;
  std::optional<conformance::ReferenceExpr> reference_;
  int written_ = -1;  // the argument the op writes (in_place and out rules), else -1
};

}  // namespace backplane::detail
