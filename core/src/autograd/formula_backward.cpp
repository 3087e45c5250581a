#include "autograd/formula_backward.h"

#include "formula/formula_node.h"

#include <ATen/ExpandUtils.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <set>

namespace backplane::detail {

BackwardPlan::BackwardPlan(const OpDef& op) : formula_of(op.arguments.size(), -1), read(op.arguments.size(), false) {
  std::map<std::string, int> seen;  // formula text -> index into formulas
  for (size_t pos = 0; pos < op.arguments.size(); ++pos) {
    auto it = op.backward.find(op.arguments[pos].name());
    if (it == op.backward.end()) continue;
    const std::string& text = it->second.formula;
    auto [found, added] = seen.emplace(text, static_cast<int>(formulas.size()));
    if (added) {
      formulas.push_back(conformance::ReferenceExpr::parse(text));
    }
    formula_of[pos] = found->second;
  }
  std::set<std::string> names;
  for (const auto& formula : formulas) names.merge(formula.names());
  uses_result = names.count("result") > 0;
  for (size_t pos = 0; pos < op.arguments.size(); ++pos) read[pos] = names.count(op.arguments[pos].name()) > 0;
}

FormulaBackward::FormulaBackward(const OpDef& op, const BackwardPlan& plan, const std::vector<c10::IValue>& args,
                                 std::vector<size_t> wanting)
    : op_(op), plan_(plan), saved_(args.size()), counters_(args.size()), wanting_(std::move(wanting)) {
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& a = args[i];
    if (!plan.read[i]) {
      versions_.push_back(0);
      args_.emplace_back();  // not kept: no formula reads it
    } else if (a.isTensor() && a.toTensor().defined()) {
      // The tensor itself only in its SavedVariable (saved-tensor hooks such as save_on_cpu
      // then free it); its version counter, shared with it, for the check in apply.
      saved_[i] = torch::autograd::SavedVariable(a.toTensor(), /*is_output=*/false);
      counters_[i] = a.toTensor().unsafeGetTensorImpl()->version_counter();
      versions_.push_back(a.toTensor()._version());
      args_.emplace_back();
    } else {
      versions_.push_back(0);
      args_.push_back(a);
    }
  }
  for (size_t pos : wanting_) input_sizes_.push_back(args[pos].toTensor().sym_sizes().vec());
}

void FormulaBackward::save_result(const at::Tensor& output) {
  saved_result_ = torch::autograd::SavedVariable(output, /*is_output=*/true);
  result_counter_ = output.unsafeGetTensorImpl()->version_counter();
  result_version_ = output._version();
}

bool FormulaBackward::saves_tensors() const {
  return result_counter_.has_value() ||
         std::any_of(counters_.begin(), counters_.end(), [](const auto& counter) { return counter.has_value(); });
}

void FormulaBackward::release_variables() {
  for (auto& saved : saved_) saved.reset_data();
  saved_result_.reset_data();
  released_ = true;
}

namespace {

// This node as its edges hold it (torch moved nodes from std::shared_ptr to c10::intrusive_ptr).
template <typename NodePtr, typename NodeType>
NodePtr self_pointer(NodeType* node) {
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<torch::autograd::Node>>)
    return node->shared_from_this();
  else
    return NodePtr::reclaim_copy(node);
}

}  // namespace

torch::autograd::variable_list FormulaBackward::apply(torch::autograd::variable_list&& grads) {
  // As PyTorch: a node that saved no tensor (add's) may run again after the graph was freed.
  TORCH_CHECK(!(released_ && saves_tensors()), op_.qualified_name(), ": ", torch::autograd::ERR_BACKWARD_TWICE);
  for (size_t i = 0; i < counters_.size(); ++i)
    if (counters_[i])
      TORCH_CHECK(counters_[i]->current_version() == versions_[i], op_.qualified_name(), ": argument '",
                  op_.arguments[i].name(), "' was modified in place after the forward, and its backward needs it "
                  "(version ", versions_[i], " saved, now ", counters_[i]->current_version(), ")");
  std::map<std::string, c10::IValue> names;
  for (size_t i = 0; i < args_.size(); ++i) {
    if (!plan_.read[i]) continue;
    names[op_.arguments[i].name()] = counters_[i] ? c10::IValue(saved_[i].unpack()) : args_[i];
  }
  at::Tensor grad = grads.at(0);
  if (!grad.defined()) return torch::autograd::variable_list(wanting_.size());
  names["grad"] = grad;
  if (plan_.uses_result) {
    TORCH_CHECK(result_counter_.has_value(), op_.qualified_name(), ": its backward formula names `result`, and "
                "the forward's output was not saved");
    TORCH_CHECK(result_counter_->current_version() == result_version_, op_.qualified_name(), ": its output was "
                "modified in place after the forward, and its backward needs it (version ", result_version_,
                " saved, now ", result_counter_->current_version(), ")");
    using NodePtr = decltype(torch::autograd::Edge::function);
    names["result"] = saved_result_.unpack(self_pointer<NodePtr>(this));
  }
  // Each formula the wanting inputs need, once. Under create_graph (grad mode on in a
  // backward), fused backward ops without a backward of their own run as their
  // references, which autograd records: second derivatives exist wherever aten's do.
  std::optional<conformance::ReferencesForUndifferentiable> differentiable;
  if (c10::GradMode::is_enabled()) differentiable.emplace();
  std::vector<std::vector<c10::IValue>> values(plan_.formulas.size());
  for (size_t pos : wanting_) {
    const int f = plan_.formula_of[pos];
    if (values[f].empty()) values[f] = plan_.formulas[f].evaluate_all(names);
  }
  torch::autograd::variable_list out;
  for (size_t k = 0; k < wanting_.size(); ++k) {
    const std::string& arg = op_.arguments[wanting_[k]].name();
    const GradientFormula& gradient = op_.backward.at(arg);
    const std::vector<c10::IValue>& given = values[plan_.formula_of[wanting_[k]]];
    TORCH_CHECK(given.size() >= gradient.outputs && given[gradient.output].isTensor(), op_.qualified_name(),
                ": its backward formula for '", arg, "' should give ", gradient.outputs, " tensor(s), one per argument its "
                "`backward:` key names, and gave ", given.size(), " value(s)");
    // Summed to the input's size where broadcasting made it larger (no-op otherwise); any
    // other shape is a wrong formula, named here rather than deep inside sum_to.
    const at::Tensor& value = given[gradient.output].toTensor();
    // Checked where sizes are concrete: a symbolic comparison could specialize a dynamic size.
    const auto want = c10::asIntArrayRefSlowOpt(c10::SymIntArrayRef(input_sizes_[k]));
    const auto have = c10::asIntArrayRefSlowOpt(value.sym_sizes());
    TORCH_CHECK(!want || !have || at::is_expandable_to(*want, *have), op_.qualified_name(),
                ": its backward formula for '", arg, "' (", op_.where.str(), ") gave a gradient of sizes ",
                value.sym_sizes(), ", which does not reduce to the argument's sizes ",
                c10::SymIntArrayRef(input_sizes_[k]), " (expected those sizes, or a broadcast of them)");
    out.push_back(at::sum_to(value, c10::SymIntArrayRef(input_sizes_[k])));
  }
  return out;
}

}  // namespace backplane::detail
