#include <backplane/op_contract.h>

#include "shape_rules/shape_rules.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

namespace backplane {
namespace {

std::string dtype_list(const OpDef& op) {
  std::string out;
  for (auto dtype : op.dtypes) out += (out.empty() ? "" : ", ") + dtype_name(dtype);
  return out;
}

std::vector<int64_t> broadcast_sizes(const OpContract& c, const std::string& a_name, const at::Tensor& a,
                                     const std::string& b_name, const at::Tensor& b) {
  const int64_t ndim = std::max(a.dim(), b.dim());
  std::vector<int64_t> sizes(ndim);
  for (int64_t i = 0; i < ndim; ++i) {
    const int64_t sa = i < ndim - a.dim() ? 1 : a.size(i - (ndim - a.dim()));
    const int64_t sb = i < ndim - b.dim() ? 1 : b.size(i - (ndim - b.dim()));
    TORCH_CHECK_VALUE(sa == sb || sa == 1 || sb == 1, c.qualified_name(), ": sizes of '", a_name, "' ", a.sizes(),
                      " and '", b_name, "' ", b.sizes(), " do not broadcast (dimension ", i - ndim, ": ", sa, " vs ",
                      sb, ")");
    sizes[i] = sa == 1 ? sb : sa;
  }
  return sizes;
}

}  // namespace

OpContract::OpContract(std::string_view op_name) : def_(registry().find(op_name)) {
  TORCH_CHECK(def_ != nullptr, "backplane: no op named '", op_name, "' in the registry");
  qualified_name_ = std::string(kNamespace) + "::" + def_->name;
}

void OpContract::check_tensors(c10::ArrayRef<c10::IValue> args) const {
  const at::Tensor* first = nullptr;
  const std::string* first_name = nullptr;
  for (const auto& name : def_->tensor_args) {
    const at::Tensor& t = args[def_->arg_index(name)].toTensor();
    TORCH_CHECK_VALUE(t.defined(), qualified_name_, ": argument '", name, "' is an undefined tensor");
    TORCH_CHECK_TYPE(def_->supports(t.scalar_type()), qualified_name_, ": argument '", name, "' has dtype ",
                     dtype_name(t.scalar_type()), ", expected one of: ", dtype_list(*def_));
    if (first == nullptr) {
      first = &t;
      first_name = &name;
      continue;
    }
    TORCH_CHECK_TYPE(t.scalar_type() == first->scalar_type(), qualified_name_, ": arguments '", *first_name,
                     "' and '", name, "' must share one dtype, found ", dtype_name(first->scalar_type()), " and ",
                     dtype_name(t.scalar_type()));
    TORCH_CHECK(t.device() == first->device(), qualified_name_, ": arguments '", *first_name, "' and '", name,
                "' must be on one device, found ", first->device(), " and ", t.device(),
                " (backplane never copies between devices for you)");
  }
}

std::vector<int64_t> OpContract::check(c10::ArrayRef<c10::IValue> args) const {
  TORCH_INTERNAL_ASSERT(args.size() == def_->arg_names.size(), qualified_name_, ": expected ",
                        def_->arg_names.size(), " arguments, got ", args.size());
  check_tensors(args);
  const ShapeRule& rule = def_->shape;
  auto tensor = [&](size_t i) -> const at::Tensor& { return args[def_->arg_index(rule.args[i])].toTensor(); };
  switch (rule.kind) {
    case ShapeRuleKind::SameAs:
      return tensor(0).sizes().vec();
    case ShapeRuleKind::Broadcast:
      return broadcast_sizes(*this, rule.args[0], tensor(0), rule.args[1], tensor(1));
    case ShapeRuleKind::InPlace: {
      const at::Tensor& x = tensor(0);
      TORCH_CHECK_VALUE(at::has_internal_overlap(x) != at::MemOverlap::Yes, qualified_name_, ": argument '",
                        rule.args[0], "' is written in place but has overlapping memory (an expanded view, sizes ",
                        x.sizes(), ", strides ", x.strides(), "); pass a tensor whose elements do not alias");
      return x.sizes().vec();
    }
    case ShapeRuleKind::Out: {
      const at::Tensor& out = tensor(0);
      TORCH_CHECK_VALUE(at::has_internal_overlap(out) != at::MemOverlap::Yes, qualified_name_, ": argument '",
                        rule.args[0], "' is written but has overlapping memory (sizes ", out.sizes(), ", strides ",
                        out.strides(), ")");
      for (const auto& name : def_->tensor_args) {
        if (name == rule.args[0]) continue;
        const at::Tensor& in = args[def_->arg_index(name)].toTensor();
        TORCH_CHECK_VALUE(at::get_overlap_status(out, in) != at::MemOverlapStatus::Partial, qualified_name_,
                          ": argument '", rule.args[0], "' partially overlaps input '", name,
                          "'; it may be the same tensor or a separate one, not a shifted view of it");
      }
      return tensor(1).sizes().vec();
    }
    case ShapeRuleKind::Custom:
      return find_custom_shape_rule(rule.custom)(*def_, args);
  }
  TORCH_INTERNAL_ASSERT(false, "unhandled shape rule");
}

at::Tensor OpContract::new_output(c10::ArrayRef<c10::IValue> args) const {
  std::vector<int64_t> sizes = check(args);
  const at::Tensor& first = args[def_->arg_index(def_->tensor_args[0])].toTensor();
  return at::empty(sizes, first.options().memory_format(c10::MemoryFormat::Contiguous));
}

const at::Tensor& OpContract::prepare_out(c10::ArrayRef<c10::IValue> args) const {
  TORCH_INTERNAL_ASSERT(def_->shape.kind == ShapeRuleKind::Out, qualified_name_, " has no out rule");
  std::vector<int64_t> sizes = check(args);
  const at::Tensor& out = args[def_->arg_index(def_->shape.args[0])].toTensor();
  at::native::resize_output(out, sizes);
  return out;
}

}  // namespace backplane
