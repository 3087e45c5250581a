#include "result_check.h"

#include <backplane/conformance_inputs.h>
#include <backplane/reference_expr.h>

#include <ATen/ATen.h>

#include <map>

namespace backplane::bench {

std::optional<std::string> check_result(const OpDef& op, const std::vector<c10::IValue>& args) {
  if (op.checks.reference.empty()) return std::nullopt;
  const bool writes = op.shape.kind == ShapeRuleKind::InPlace || op.shape.kind == ShapeRuleKind::Out;
  const int written = writes ? op.arg_index(op.shape.args[0]) : -1;
  torch::jit::Stack stack;
  std::map<std::string, c10::IValue> names;
  c10::ScalarType dtype = at::kFloat;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].isTensor()) {
      stack.push_back(args[i]);
      names[op.arguments[i].name()] = args[i];
      continue;
    }
    const at::Tensor& t = args[i].toTensor();
    dtype = t.scalar_type();
    stack.push_back(static_cast<int>(i) == written ? t.clone() : t);
    names[op.arguments[i].name()] = t.cpu().to(at::kDouble);
  }
  const torch::jit::Stack call = stack;
  conformance::op_handle(op).callBoxed(stack);
  const at::Tensor actual = writes ? call[written].toTensor() : stack[0].toTensor();
  const c10::IValue expected = conformance::ReferenceExpr::parse(op.checks.reference).evaluate(names);
  std::optional<std::pair<double, double>> tolerance;
  if (auto it = op.checks.tolerance.find(dtype); it != op.checks.tolerance.end()) tolerance = it->second;
  return conformance::compare(actual, expected.toTensor().to(dtype).contiguous(), op.checks.exact, tolerance);
}

}  // namespace backplane::bench
