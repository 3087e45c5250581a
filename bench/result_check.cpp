#include "result_check.h"

#include "conformance/inputs.h"
#include "formula/reference_expr.h"

#include <ATen/ATen.h>

#include <map>

namespace backplane::bench {

std::optional<std::string> check_result(const OpDef& op, const std::vector<c10::IValue>& args) {
  if (op.checks.reference.empty()) return std::nullopt;
  const int written = op.writes() ? op.arg_index(op.shape.args[0]) : -1;
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
  const std::vector<at::Tensor> actual = conformance::op_results(op, call, stack);
  const std::vector<c10::IValue> expected =
      conformance::reference_values(op, conformance::ReferenceExpr::parse(op.checks.reference), names);
  if (expected.size() != actual.size())
    return "the reference gives " + std::to_string(expected.size()) + " value(s) for " + std::to_string(actual.size()) +
           " output(s)";
  std::optional<std::pair<double, double>> tolerance;
  if (auto it = op.checks.tolerance.find(dtype); it != op.checks.tolerance.end()) tolerance = it->second;
  for (size_t k = 0; k < actual.size(); ++k)
    if (auto wrong = conformance::compare(actual[k], expected[k].toTensor().to(dtype).contiguous(), op.checks.exact,
                                          tolerance))
      return actual.size() == 1 ? wrong : "output " + std::to_string(k) + ": " + *wrong;
  return std::nullopt;
}

}  // namespace backplane::bench
