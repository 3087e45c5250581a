// The autograd node of an op with `backward:` formulas in the registry.
//
// Saved for backward, as PyTorch's own nodes save: the op's arguments its formulas read and,
// where a formula names `result`, the op's (first) output, each as a SavedVariable (the
// output without a reference cycle through this node). A later in-place write to one is an
// error naming the op and the argument; a second backward after the graph was freed (no
// retain_graph) is PyTorch's "backward through the graph a second time" error. Each
// formula is evaluated once with the arguments, `grad` and `result` bound, in the op's
// dtype on its device (a formula giving several inputs' gradients, such as a backward op
// returning dx and dweight, is called once for all of them, even where only some want
// one), and each gradient is summed to its input's size (broadcasting).
// Under create_graph=True (double backward, torch.func.grad) the formulas run with
// gradients on, over the saved tensors themselves: a formula of differentiable ATen calls
// gives true second derivatives, and one through a registry op without a `backward:` of
// its own (rms_norm_backward) records that op's error node, so differentiating again is
// an error naming it, never a silent zero.
#pragma once

#include "formula/reference_expr.h"
#include <backplane/registry.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/saved_variable.h>

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
  void release_variables() override;
  std::string name() const override { return op_.qualified_name() + "_backward"; }

 private:
  bool saves_tensors() const;  // an argument or the output: PyTorch's second-backward rule applies

  const OpDef& op_;
  const BackwardPlan& plan_;  // the Autograd kernel's, which outlives every node
  std::vector<c10::IValue> args_;      // non-tensor values as given (none for tensors)
  std::vector<torch::autograd::SavedVariable> saved_;  // per argument: the tensors a formula reads
  std::vector<std::optional<c10::VariableVersion>> counters_;  // per saved tensor: its version counter
  std::vector<uint32_t> versions_;     // of each argument's tensor, at the forward (0 otherwise)
  torch::autograd::SavedVariable saved_result_;  // where a formula names `result`
  std::optional<c10::VariableVersion> result_counter_;
  uint32_t result_version_ = 0;
  bool released_ = false;              // the graph was freed (backward without retain_graph)
  std::vector<size_t> wanting_;
  // One per wanting_. Symbolic sizes: reading concrete ones would specialize a dynamic
  // dimension under torch.export / torch.compile.
  std::vector<std::vector<c10::SymInt>> input_sizes_;
};

}  // namespace backplane::detail
