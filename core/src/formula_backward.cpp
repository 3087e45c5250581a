#include "formula_backward.h"

#include <ATen/ExpandUtils.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/GradMode.h>

#include <map>

namespace backplane::detail {

FormulaBackward::FormulaBackward(const OpDef& op, const c10::OperatorHandle& handle,
                                 const std::vector<c10::IValue>& args, std::vector<size_t> wanting)
    : op_(op), handle_(handle), wanting_(std::move(wanting)) {
  for (const c10::IValue& a : args) {
    if (a.isTensor() && a.toTensor().defined()) {
      versions_.push_back(a.toTensor()._version());
      args_.emplace_back(a.toTensor().detach());
    } else {
      versions_.push_back(0);
      args_.push_back(a);
    }
  }
  std::map<std::string, size_t> seen;  // formula text -> index into formulas_
  for (size_t pos : wanting_) {
    const std::string& formula = op.backward.at(op.arguments[pos].name()).formula;
    auto [it, added] = seen.emplace(formula, formulas_.size());
    if (added) {
      formulas_.push_back(conformance::ReferenceExpr::parse(formula));
      uses_result_ = uses_result_ || formula.find("result") != std::string::npos;
    }
    formula_of_.push_back(it->second);
    input_sizes_.push_back(args[pos].toTensor().sym_sizes().vec());
  }
}

torch::autograd::variable_list FormulaBackward::apply(torch::autograd::variable_list&& grads) {
  TORCH_CHECK(!c10::GradMode::is_enabled(), op_.qualified_name(),
              ": double backward (create_graph=True) is not supported; its backward: formulas give first "
              "derivatives only");
  for (size_t i = 0; i < args_.size(); ++i)
    if (args_[i].isTensor())
      TORCH_CHECK(args_[i].toTensor()._version() == versions_[i], op_.qualified_name(), ": argument '",
                  op_.arguments[i].name(), "' was modified in place after the forward, and its backward needs it "
                  "(version ", versions_[i], " saved, now ", args_[i].toTensor()._version(), ")");
  std::map<std::string, c10::IValue> names;
  for (size_t i = 0; i < args_.size(); ++i) names[op_.arguments[i].name()] = args_[i];
  at::Tensor grad = grads.at(0);
  if (!grad.defined()) return torch::autograd::variable_list(wanting_.size());
  names["grad"] = grad;
  if (uses_result_) {
    at::AutoDispatchBelowADInplaceOrView below;  // the forward again, without recording
    torch::jit::Stack stack(args_.begin(), args_.end());
    handle_.callBoxed(stack);
    names["result"] = stack.at(0);
  }
  std::vector<std::vector<c10::IValue>> values;
  for (const auto& formula : formulas_) values.push_back(formula.evaluate_all(names));
  torch::autograd::variable_list out;
  for (size_t k = 0; k < wanting_.size(); ++k) {
    const std::string& arg = op_.arguments[wanting_[k]].name();
    const GradientFormula& gradient = op_.backward.at(arg);
    const std::vector<c10::IValue>& given = values[formula_of_[k]];
    TORCH_CHECK(given.size() >= gradient.outputs && given[gradient.output].isTensor(), op_.qualified_name(),
                ": its backward formula for '", arg, "' should give ", gradient.outputs, " tensor(s), one per argument its "
                "`backward:` key names, and gave ", given.size(), " value(s)");
    // Summed to the input's size where broadcasting made it larger (no-op otherwise).
    out.push_back(at::sum_to(given[gradient.output].toTensor(), c10::SymIntArrayRef(input_sizes_[k])));
  }
  return out;
}

}  // namespace backplane::detail
