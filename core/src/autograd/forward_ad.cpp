#include "autograd/forward_ad.h"

#include <c10/util/Exception.h>

#include <map>
#include <string>

namespace backplane::detail {
namespace {

constexpr uint64_t kLevel = 0;  // PyTorch's forward-AD level, as its generated kernels read it

bool has_tangent(const c10::IValue& value) {
  return value.isTensor() && value.toTensor().defined() && value.toTensor()._fw_grad(kLevel).defined();
}

// Sets t's tangent: the first one, or written into the one it has (an in-place op's).
void give_tangent(const at::Tensor& t, const at::Tensor& tangent, bool in_place) {
  const at::Tensor& existing = t._fw_grad(kLevel);
  if (existing.defined())
    existing.copy_(tangent);
  else
    t._set_fw_grad(tangent, kLevel, in_place);
}

}  // namespace

ForwardTangents::ForwardTangents(const OpDef& op) : op_(op) {
  if (!op.checks.reference.empty()) reference_ = conformance::ReferenceExpr::parse(op.checks.reference);
  if (op.writes()) written_ = op.arg_index(op.shape.args[0]);
}

bool ForwardTangents::any_tangent(const torch::jit::Stack& stack, size_t n) {
  for (size_t i = stack.size() - n; i < stack.size(); ++i)
    if (has_tangent(stack[i])) return true;
  return false;
}

std::vector<at::Tensor> ForwardTangents::compute(const c10::FunctionSchema& schema,
                                                 const torch::jit::Stack& stack) const {
  TORCH_CHECK(reference_.has_value(), op_.qualified_name(),
              ": forward-mode AD (torch.func.jvp, torch.autograd.forward_ad) is not supported: its registry entry "
              "has no `reference:` to derive the tangent from. Detach the tangent's inputs, or use reverse mode "
              "(torch.func.vjp, .backward()).");
  const size_t n = schema.arguments().size();
  std::map<std::string, c10::IValue> names;
  for (size_t i = 0; i < n; ++i)
    if (static_cast<int>(i) != written_ || op_.shape.kind == ShapeRuleKind::InPlace)
      names[schema.arguments()[i].name()] = stack[stack.size() - n + i];
  std::vector<c10::IValue> values;
  // In the op's opmath (float32 for half types), as its kernels compute, so a tangent
  // through x*x does not overflow float16. Under the caller's grad mode, as PyTorch's own
  // forward formulas run: a tangent then
  // carries a backward graph where gradients are on, so reverse over forward
  // (jacrev(jacfwd(f)), grad of a jvp) differentiates it instead of seeing a constant.
  try {
    values = reference_->evaluate_all_in_opmath(names);
  } catch (const c10::NotImplementedError& e) {
    // An ATen op of the reference without a forward derivative: say whose tangent it was.
    TORCH_CHECK_NOT_IMPLEMENTED(false, op_.qualified_name(), ": forward-mode AD derives the tangent from the "
                                "registry's reference (", op_.checks.reference, "), and PyTorch refuses it: ",
                                e.what_without_backtrace());
  }
  std::vector<at::Tensor> input_tangents;
  for (const auto& [name, value] : names)
    if (has_tangent(value)) input_tangents.push_back(value.toTensor()._fw_grad(kLevel));
  std::vector<at::Tensor> tangents;
  for (const c10::IValue& value : values) {
    at::Tensor tangent = value.isTensor() && value.toTensor().defined() ? value.toTensor()._fw_grad(kLevel)
                                                                         : at::Tensor();
    // A reference that returns an input, or a view of one, gives that input's tangent:
    // the output gets a copy, so an in-place op on one later cannot change the other's.
    // Tensors without storage (torch.func's wrappers) cannot be compared: copied too.
    for (const at::Tensor& given : input_tangents)
      if (tangent.defined() && (!tangent.has_storage() || !given.has_storage() || tangent.is_alias_of(given))) {
        tangent = tangent.clone();
        break;
      }
    tangents.push_back(tangent);
  }
  return tangents;
}

void ForwardTangents::attach(const c10::FunctionSchema& schema, torch::jit::Stack& stack, const at::Tensor& written,
                             const std::vector<at::Tensor>& tangents) const {
  if (written_ >= 0) {
    const at::Tensor tangent = tangents.empty() ? at::Tensor() : tangents[0];
    if (tangent.defined())
      give_tangent(written, tangent, /*in_place=*/true);
    else if (written._fw_grad(kLevel).defined())
      written._fw_grad(kLevel).zero_();  // overwritten by a value without a tangent: its old one is stale
    return;
  }
  const size_t returns = schema.returns().size();
  TORCH_CHECK(tangents.size() >= returns, op_.qualified_name(), ": its reference gives ", tangents.size(),
              " value(s) for forward-mode AD, expected one per output (", returns, ")");
  for (size_t i = 0; i < returns; ++i) {
    const c10::IValue& out = stack[stack.size() - returns + i];
    if (!tangents[i].defined() || !out.isTensor() || !out.toTensor().defined()) continue;
    give_tangent(out.toTensor(), tangents[i], /*in_place=*/false);
  }
}

}  // namespace backplane::detail
