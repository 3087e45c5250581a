// The autograd node of an op with `backward:` formulas in the registry.
//
// Saved for backward: the op's arguments its formulas read (tensors detached, with their versions, so a
// later in-place write to one is an error, as with PyTorch's saved variables), and where
// a formula names `result`, the op's (first) output, likewise detached: a detached tensor
// shares the output's storage and version counter but not its grad_fn, so the node holds
// no reference cycle through itself. Each formula is
// evaluated once with the arguments, `grad` and `result` bound, in the op's dtype on its
// device (a formula giving several inputs' gradients, such as a backward op returning
// dx and dweight, is called once for all of them, even where only some want one), and
// each gradient is summed to its input's size (broadcasting). Double backward
// (create_graph=True) is refused with a message: the formulas run on detached tensors,
// so a second derivative would be silently wrong.
#pragma once

#include <backplane/reference_expr.h>
#include <backplane/registry.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>

#include <optional>
#include <string>
#include <vector>

namespace backplane::detail {

// An op's `backward:` entries, parsed once (the Autograd kernel holds it): each distinct
// formula, and for each argument with one, which formula and which of its values.
struct BackwardPlan {
  explicit BackwardPlan(const OpDef& op);
  std::vector<conformance::ReferenceExpr> formulas;
  std::vector<int> formula_of;  // per argument in schema order; -1: no formula
  // Per argument: read by some formula, so the node keeps it. Only these are saved: add's
  // formulas read no tensor, so an add in a training graph holds neither input alive.
  std::vector<bool> read;
  bool uses_result = false;
};

class FormulaBackward : public torch::autograd::Node {
 public:
  // `wanting`: positions (in schema order) of the Tensor arguments that get an edge,
  // each with a formula in op.backward.
  FormulaBackward(const OpDef& op, const BackwardPlan& plan, const std::vector<c10::IValue>& args,
                  std::vector<size_t> wanting);

  // The forward's output, for formulas naming `result` (the Autograd kernel calls this
  // once the output exists).
  void save_result(const at::Tensor& output);

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override;
  std::string name() const override { return op_.qualified_name() + "_backward"; }

 private:
  const OpDef& op_;
  const BackwardPlan& plan_;  // the Autograd kernel's, which outlives every node
  std::vector<c10::IValue> args_;      // tensors detached
  std::vector<uint32_t> versions_;     // of each saved tensor, at the forward
  at::Tensor result_;                  // detached; undefined unless a formula names `result`
  uint32_t result_version_ = 0;
  std::vector<size_t> wanting_;
  // One per wanting_. Symbolic sizes: reading concrete ones would specialize a dynamic
  // dimension under torch.export / torch.compile.
  std::vector<std::vector<c10::SymInt>> input_sizes_;
};

}  // namespace backplane::detail
