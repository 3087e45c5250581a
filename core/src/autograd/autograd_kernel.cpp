// The Autograd kernel of every registry op.
//
// Without any Autograd kernel the dispatcher falls through: the output carries no
// grad_fn and everything upstream silently keeps .grad None (PyTorch only warns). This
// kernel instead:
//  - runs the forward as usual, so inference with parameters that require grad works;
//  - records FormulaBackward (formula_backward.h) when every input wanting a gradient
//    has a `backward:` formula in the registry;
//  - otherwise gives outputs (and arguments written in place) a node whose backward
//    raises an error naming the op and the inputs without a derivative;
//  - writing in place to a leaf that requires grad is refused, as PyTorch refuses it;
//  - every written argument's version counter is bumped, so autograd notices a saved
//    tensor that was overwritten;
//  - where an input carries a forward-mode tangent, gives the outputs theirs
//    (forward_ad.h), or refuses naming the op.
#include "autograd/autograd_kernel.h"

#include "autograd/formula_backward.h"
#include "autograd/forward_ad.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/VariableTypeUtils.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace backplane::detail {
namespace {

using torch::autograd::Edge;
using torch::autograd::edge_list;

// torch moved autograd nodes from std::shared_ptr to c10::intrusive_ptr; Edge says which.
using NodePtr = decltype(Edge::function);
template <typename NodeType, typename... Args>
NodePtr make_node(Args&&... args) {
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<torch::autograd::Node>>)
    return std::make_shared<NodeType>(std::forward<Args>(args)...);
  else
    return c10::make_intrusive<NodeType>(std::forward<Args>(args)...);
}

bool is_written(const c10::Argument& arg) { return arg.alias_info() && arg.alias_info()->isWrite(); }

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return out;
}

void autograd_kernel(const OpDef& def, const BackwardPlan& plan, const ForwardTangents& forward,
                     const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const std::string& op_name = schema.name();
  const size_t n = schema.arguments().size();
  const bool grad_mode = c10::GradMode::is_enabled();

  std::vector<at::Tensor> wanting_grad, written;
  std::vector<std::string> without_formula;
  std::vector<size_t> wanting_positions;
  for (size_t i = 0; i < n; ++i) {
    const c10::IValue& value = (*stack)[stack->size() - n + i];
    if (!value.isTensor()) continue;
    const at::Tensor& t = value.toTensor();
    if (!t.defined()) continue;
    const c10::Argument& arg = schema.arguments()[i];
    if (is_written(arg)) {
      TORCH_CHECK(!(grad_mode && t.requires_grad() && t.is_leaf()), op_name, ": argument '", arg.name(),
                  "' is a leaf tensor that requires grad; writing to it in place is refused, as PyTorch refuses "
                  "it (a leaf Variable that requires grad is being used in an in-place operation). Write to a "
                  "clone, or call under torch.no_grad().");
      // A view of such a leaf, and views PyTorch forbids writing to (unbind outputs,
      // views made in no_grad mode), are refused by PyTorch's own in-place check.
      if (grad_mode && t.is_view()) torch::autograd::check_inplace(t, /*requires_grad=*/true);
      written.push_back(t);
    }
    if (grad_mode && t.requires_grad()) {
      wanting_grad.push_back(t);
      wanting_positions.push_back(i);
      if (plan.formula_of[i] < 0) without_formula.push_back(arg.name());
    }
  }
  // Saved before the forward runs: the formulas need the inputs as they were.
  std::vector<c10::IValue> args;
  if (!wanting_grad.empty() && without_formula.empty())
    args.assign(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());

  // Tangents before the kernel runs: a written argument's old value is still there.
  std::vector<at::Tensor> tangents;
  const bool forward_mode = ForwardTangents::any_tangent(*stack, n);
  if (forward_mode) tangents = forward.compute(schema, *stack);

  {
    // Below autograd, and below ADInplaceOrView: at:: calls inside the kernel must not
    // record graph nodes of their own.
    at::AutoDispatchBelowADInplaceOrView below;
    op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
  }
  for (const at::Tensor& t : written) torch::autograd::increment_version(t);
  if (forward_mode) forward.attach(schema, *stack, written.empty() ? at::Tensor() : written[0], tangents);
  if (wanting_grad.empty()) return;

  edge_list edges;
  for (const at::Tensor& t : wanting_grad) edges.push_back(torch::autograd::impl::gradient_edge(t));
  NodePtr node;
  if (without_formula.empty()) {
    node = make_node<FormulaBackward>(def, plan, args, wanting_positions);
    node->set_next_edges(std::move(edges));
  } else {
    node = make_node<torch::autograd::Error>(
        op_name + " has no derivative for " + quoted_list(without_formula) +
            (def.backward.empty() ? ": its registry entry has no `backward:` yet."
                                  : ": its registry entry's `backward:` has no formula for it.") +
            " The forward ran; backward through it cannot. Detach those inputs, or run the op under "
            "torch.no_grad(), if no gradient is needed there.",
        std::move(edges));
  }
  // Outputs that autograd can carry a gradient for point at the node; a written argument
  // is rebased onto it, so the gradient through the in-place write is refused, not
  // computed as if the write had not happened.
  for (const at::Tensor& t : written) {
    if (!torch::autograd::isDifferentiableType(t.scalar_type())) continue;
    const uint32_t slot = node->add_input_metadata(t);
    torch::autograd::impl::rebase_history(t, {node, slot});
  }
  const size_t returns = schema.returns().size();
  for (size_t i = 0; i < returns; ++i) {
    c10::IValue& value = (*stack)[stack->size() - returns + i];
    if (!value.isTensor() || !value.toTensor().defined()) continue;
    const at::Tensor& out = value.toTensor();
    if (is_written(schema.returns()[i]) || !torch::autograd::isDifferentiableType(out.scalar_type())) continue;
    torch::autograd::set_history(out, node);
  }
  // `result` in a formula is the first output: saved rather than computed again in backward.
  if (without_formula.empty() && plan.uses_result && returns > 0) {
    const c10::IValue& first = (*stack)[stack->size() - returns];
    if (first.isTensor() && first.toTensor().defined())
      static_cast<FormulaBackward*>(node.get())->save_result(first.toTensor());
  }
}

}  // namespace

class AutogradKernel final : public c10::OperatorKernel {
 public:
  explicit AutogradKernel(const OpDef& def) : def_(def), plan_(def), forward_(def) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    autograd_kernel(def_, plan_, forward_, op, keys, stack);
  }

 private:
  const OpDef& def_;  // the registry outlives every kernel
  const BackwardPlan plan_;  // its formulas parsed once, not at every forward
  const ForwardTangents forward_;  // its reference, likewise
};

void register_autograd(torch::Library& library, const OpDef& op) {
  // The kernel redispatches below ADInplaceOrView itself and bumps versions there, so
  // that key needs no kernel of its own.
  library.impl(op.name.c_str(),
               torch::dispatch(c10::DispatchKey::Autograd,
                               torch::CppFunction::makeFromBoxedFunctor(std::make_unique<AutogradKernel>(op))));
}

}  // namespace backplane::detail
