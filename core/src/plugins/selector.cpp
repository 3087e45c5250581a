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

}  // namespace

void Selector::operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const Choice* choice = slot_->chosen.load(std::memory_order_acquire);
  const c10::KernelFunction* kernel = choice->by_size.back().second;
  if (choice->by_size.size() > 1) {
    const std::int64_t size = call_size(op, *stack);
    for (const auto& [up_to, k] : choice->by_size)
      if (size <= up_to) {
        kernel = k;
        break;
      }
  }
  kernel->callBoxed(op, keys, stack);
}

}  // namespace backplane::detail
