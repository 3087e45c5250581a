#include "define/op_definition.h"

#include <backplane/plugin/op_contract.h>

#include "autocast/autocast_kernel.h"
#include "autograd/autograd_kernel.h"

#include <memory>

namespace backplane::detail {
namespace {

// Runs the op's contract (same checks and messages as the real kernels) and returns
// meta tensors of the rules' shapes (one per output).
class RuleMetaKernel final : public c10::OperatorKernel {
 public:
  explicit RuleMetaKernel(const std::string& op_id) : contract_(op_id) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const OpDef& def = contract_.def();
    const size_t n = def.arg_names.size();
    auto args = torch::jit::last(*stack, n);
    switch (def.shape.kind) {
      case ShapeRuleKind::InPlace:
        contract_.check(args);
        torch::jit::drop(*stack, n);
        return;
      case ShapeRuleKind::Out:
        contract_.check_out(args);
        torch::jit::drop(*stack, n);
        return;
      default: {
        std::vector<at::Tensor> outs = contract_.new_outputs(args);
        torch::jit::drop(*stack, n);
        for (at::Tensor& out : outs) stack->emplace_back(std::move(out));
        return;
      }
    }
  }

 private:
  OpContract contract_;
};

}  // namespace

void define_op(torch::Library& library, const OpDef& op) {
  // pt2_compliant: the Meta kernel makes every op traceable by export/compile, which the
  // pytest suite checks with torch.library.opcheck.
  library.def(op.schema.c_str(), {at::Tag::pt2_compliant_tag});
  library.impl(op.name.c_str(), torch::dispatch(c10::DispatchKey::Meta, torch::CppFunction::makeFromBoxedFunctor(
                                                                             std::make_unique<RuleMetaKernel>(op.id()))));
  // Gradients from the op's `backward:` formulas; without them, asking for one is an
  // error naming the op, never a silent None gradient (autograd_kernel.cpp).
  register_autograd(library, op);
  // Under torch.autocast, the op's inputs are cast by its `autocast:` rule, the same on
  // cpu, cuda and PrivateUse1 devices (autocast_kernel.cpp).
  register_autocast(library, op);
}

}  // namespace backplane::detail
