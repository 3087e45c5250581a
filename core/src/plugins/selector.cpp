// The kernel the dispatcher reaches for an (op, key) two plugins offer.
#include "plugins/selection_slot.h"

#include <algorithm>

namespace backplane::detail {
namespace {

// The element count of the largest Tensor among the call's arguments (the top of the
// stack): a selection file's size. Tensor lists count their largest element.
std::int64_t call_size(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const std::size_t args = std::min(op.schema().arguments().size(), stack.size());
  std::int64_t largest = 0;
  for (std::size_t i = stack.size() - args; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      largest = std::max(largest, v.toTensor().numel());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) largest = std::max(largest, t.numel());
    }
  }
  return largest;
}

// The dtype of the call's first defined Tensor argument: a registry op's Tensor arguments
// share one (its contract refuses others before a kernel runs). Undefined for none.
c10::ScalarType call_dtype(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const std::size_t args = std::min(op.schema().arguments().size(), stack.size());
  for (std::size_t i = stack.size() - args; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor() && v.toTensor().defined()) return v.toTensor().scalar_type();
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorList().vec())
        if (t.defined()) return t.scalar_type();
  }
  return c10::ScalarType::Undefined;
}

}  // namespace

void Selector::operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const Choice* choice = slot_->chosen.load(std::memory_order_acquire);
  const BySize* by_size = &choice->by_size;
  if (!choice->by_dtype.empty()) {
    const c10::ScalarType dtype = call_dtype(op, *stack);
    for (const auto& [d, sizes] : choice->by_dtype)
      if (d == dtype) by_size = &sizes;
  }
  const c10::KernelFunction* kernel = by_size->back().second;
  if (by_size->size() > 1) {
    const std::int64_t size = call_size(op, *stack);
    for (const auto& [up_to, k] : *by_size)
      if (size <= up_to) {
        kernel = k;
        break;
      }
  }
  kernel->callBoxed(op, keys, stack);
}

}  // namespace backplane::detail
