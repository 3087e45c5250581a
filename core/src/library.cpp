// The namespace's only TORCH_LIBRARY block: every schema from the registry, and a
// Meta kernel for each op built from its shape rule, so FakeTensor, torch.compile,
// torch.export and AOTInductor need no Python fake registrations.
#include <backplane/op_contract.h>
#include <backplane/registry.h>

#include "custom_classes.h"
#include "autograd_kernel.h"

#include <torch/library.h>

#include <memory>

namespace backplane {
namespace {

// Runs the op's contract (same checks and messages as the real kernels) and returns
// meta tensors of the rule's shape.
class RuleMetaKernel final : public c10::OperatorKernel {
 public:
  explicit RuleMetaKernel(const std::string& op_name) : contract_(op_name) {}

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
        at::Tensor out = contract_.new_output(args);
        torch::jit::drop(*stack, n);
        stack->emplace_back(std::move(out));
        return;
      }
    }
  }

 private:
  OpContract contract_;
};

}  // namespace

TORCH_LIBRARY(backplane, m) {
  for (const OpDef& op : registry().ops()) {
    // pt2_compliant: the Meta kernel below makes every op traceable by export/compile,
    // which the pytest suite checks with torch.library.opcheck.
    m.def(op.schema.c_str(), {at::Tag::pt2_compliant_tag});
    m.impl(op.name.c_str(), torch::dispatch(c10::DispatchKey::Meta, torch::CppFunction::makeFromBoxedFunctor(
                                                                         std::make_unique<RuleMetaKernel>(op.name))));
    // Gradients from the op's `backward:` formulas; without them, asking for one is an
    // error naming the op, never a silent None gradient (autograd_kernel.cpp).
    detail::register_autograd(m, op);
  }
  detail::define_classes(m, registry());
}

}  // namespace backplane
