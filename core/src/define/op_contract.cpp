#include <backplane/plugin/op_contract.h>

#include "define/memory_overlap.h"
#include "define/shape_rules/shape_rules.h"

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <utility>

namespace backplane {
namespace {

std::string dtype_list(const OpDef& op) {
  std::string out;
  for (auto dtype : op.dtypes) out += (out.empty() ? "" : ", ") + dtype_name(dtype);
  return out;
}

// Broadcasting that keeps dynamic sizes symbolic: a size-1 test that is not known
// statically takes the general branch and records a runtime assertion instead of a
// guard (a dynamic batch size is not specialized to 1 or not-1).
std::vector<c10::SymInt> broadcast_sizes(const OpContract& c, const std::string& a_name, c10::SymIntArrayRef a,
                                         const std::string& b_name, c10::SymIntArrayRef b) {
  // The common case, equal concrete sizes, without a SymInt comparison per dimension.
  if (const auto ia = c10::asIntArrayRefSlowOpt(a))
    if (const auto ib = c10::asIntArrayRefSlowOpt(b))
      if (*ia == *ib) return a.vec();
  const int64_t a_dim = static_cast<int64_t>(a.size()), b_dim = static_cast<int64_t>(b.size());
  const int64_t ndim = std::max(a_dim, b_dim);
  std::vector<c10::SymInt> sizes(ndim);
  for (int64_t i = 0; i < ndim; ++i) {
    const c10::SymInt sa = i < ndim - a_dim ? c10::SymInt(1) : a[i - (ndim - a_dim)];
    const c10::SymInt sb = i < ndim - b_dim ? c10::SymInt(1) : b[i - (ndim - b_dim)];
    if (TORCH_GUARD_OR_FALSE(sb.sym_eq(1))) {
      sizes[i] = sa;
    } else if (TORCH_GUARD_OR_FALSE(sa.sym_eq(1))) {
      sizes[i] = sb;
    } else {
      TORCH_CHECK_VALUE(sa.sym_eq(sb).expect_true(__FILE__, __LINE__), c.qualified_name(), ": sizes of '", a_name,
                        "' ", a, " and '", b_name, "' ", b, " do not broadcast (dimension ",
                        i - ndim, ": ", sa, " vs ", sb, ")");
      sizes[i] = sa;
    }
  }
  return sizes;
}

std::vector<c10::SymInt> sizes_of(const at::Tensor& t) { return t.sym_sizes().vec(); }

// Overlap is a question about real memory. Tensors with symbolic sizes (FakeTensor
// under dynamic shapes) have none, and torch 2.11's overlap helpers call numel() on
// them and throw; the real kernel checks when the op runs.
bool has_memory_layout(const at::Tensor& t) { return !t.unsafeGetTensorImpl()->has_symbolic_sizes_strides(); }

// A new tensor from `allocator`, laid out as `like` (contiguous when null).
at::Tensor empty_from(c10::Allocator* allocator, c10::DispatchKey key, c10::IntArrayRef sizes, const at::Tensor* like,
                      c10::ScalarType dtype) {
  const c10::DispatchKeySet keys(key);
  if (like != nullptr) return at::detail::empty_strided_generic(sizes, like->strides(), allocator, keys, dtype);
  return at::detail::empty_generic(sizes, allocator, keys, dtype, std::nullopt);
}

// A written tensor two of whose indices reach one element: the kernel's result would
// depend on its order of writes, so it is refused, on every backend and in the Meta kernel.
void check_writable(const std::string& op, const std::string& arg, const at::Tensor& t) {
  // Inference tensors have no autograd keys, so this is the one check every path passes.
  TORCH_CHECK(!t.is_inference() || c10::InferenceMode::is_enabled(), op, ": argument '", arg,
              "' is an inference tensor, written outside torch.inference_mode(); PyTorch refuses in-place updates "
              "to inference tensors there too. Write to a clone, or call inside torch.inference_mode().");
  if (!has_memory_layout(t)) return;
  const detail::Overlap overlap = detail::internal_overlap(t);
  TORCH_CHECK_VALUE(overlap == detail::Overlap::No, op, ": argument '", arg, "' is written but ",
                    overlap == detail::Overlap::Yes ? "two of its indices reach the same element"
                                                    : "its elements may overlap (a layout too large to check)",
                    " (sizes ", t.sizes(), ", strides ", t.strides(), "); pass a tensor whose elements do not alias, "
                    "e.g. a .clone()");
}

}  // namespace

OpContract::OpContract(std::string_view op_name) : def_(find_op_def(op_name)) {
  TORCH_CHECK(def_ != nullptr, "backplane: no op named '", op_name, "' in the registry or a loaded plugin's fragment");
  qualified_name_ = def_->qualified_name();
  for (const auto& name : def_->tensor_args) tensor_positions_.push_back(def_->arg_index(name));
  auto positions = [&](const ShapeRule& rule) {
    std::vector<int> out;
    for (const auto& name : rule.args) out.push_back(def_->arg_index(name));
    return out;
  };
  rule_positions_.push_back(positions(def_->shape));
  for (const ShapeRule& rule : def_->extra_outputs) rule_positions_.push_back(positions(rule));
}

void OpContract::check_tensors(c10::ArrayRef<c10::IValue> args) const {
  const at::Tensor* first = nullptr;
  const std::string* first_name = nullptr;
  for (size_t i = 0; i < tensor_positions_.size(); ++i) {
    const std::string& name = def_->tensor_args[i];
    const at::Tensor& t = args[tensor_positions_[i]].toTensor();
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

// The tensor an op writes (in_place and out rules): writable (check_writable), and apart
// from each other Tensor argument: the same elements in the same layout, or none in
// common. A shifted or interleaved view would make the result depend on the kernel's
// order of reads and writes.
void OpContract::check_written(const std::string& written_name, const at::Tensor& written,
                               c10::ArrayRef<c10::IValue> args) const {
  check_writable(qualified_name_, written_name, written);
  if (!has_memory_layout(written)) return;
  for (size_t i = 0; i < tensor_positions_.size(); ++i) {
    const std::string& name = def_->tensor_args[i];
    const at::Tensor& in = args[tensor_positions_[i]].toTensor();
    if (name == written_name || !has_memory_layout(in)) continue;
    const detail::Overlap overlap = detail::partial_overlap(written, in);
    TORCH_CHECK_VALUE(overlap == detail::Overlap::No, qualified_name_, ": argument '", written_name, "' ",
                      overlap == detail::Overlap::Yes ? "shares elements with" : "may share elements with (too large to check)",
                      " input '", name, "' (sizes ", written.sizes(), ", strides ", written.strides(), ", offset ",
                      written.storage_offset(), " and sizes ", in.sizes(), ", strides ", in.strides(), ", offset ",
                      in.storage_offset(), " in one storage); it may be the same tensor or a separate one, not a "
                      "shifted or interleaved view of it");
  }
}

// A Scalar argument must be a number the tensors' dtype can take, as ATen requires
// (torch.add(a, b, alpha=True) is refused there too): checked here, so every backend
// refuses at the call, not inside queued work.
void OpContract::check_scalars(c10::ArrayRef<c10::IValue> args) const {
  if (tensor_positions_.empty()) return;
  const c10::ScalarType dtype = args[tensor_positions_[0]].toTensor().scalar_type();
  for (size_t i = 0; i < def_->arguments.size(); ++i) {
    if (args[i].isString()) check_choice(def_->arguments[i].name(), args[i].toStringRef());
    if (def_->arguments[i].type()->kind() != c10::TypeKind::NumberType) continue;
    const c10::IValue& value = args[i];
    const char* found = value.isBool() ? "a bool" : value.isComplexDouble() && !c10::isComplexType(dtype) ? "a complex number" : nullptr;
    TORCH_CHECK_TYPE(found == nullptr, qualified_name_, ": argument '", def_->arguments[i].name(), "' is ", found,
                     " (", value, "); expected a real number for tensors of dtype ", dtype_name(dtype));
  }
}

// A str argument the registry lists `choices:` for takes one of them (registry.h).
void OpContract::check_choice(const std::string& arg, const std::string& value) const {
  const auto choices = def_->choices.find(arg);
  if (choices == def_->choices.end()) return;
  for (const std::string& allowed : choices->second)
    if (value == allowed) return;
  std::string expected;
  for (const std::string& allowed : choices->second) expected += (expected.empty() ? "'" : ", '") + allowed + "'";
  TORCH_CHECK_VALUE(false, qualified_name_, ": argument '", arg, "' is '", value, "'; expected one of: ", expected);
}

std::vector<c10::SymInt> OpContract::check(c10::ArrayRef<c10::IValue> args) const {
  TORCH_INTERNAL_ASSERT(args.size() == def_->arg_names.size(), qualified_name_, ": expected ",
                        def_->arg_names.size(), " arguments, got ", args.size());
  check_tensors(args);
  check_scalars(args);
  return rule_sizes(0, args);
}

std::vector<c10::SymInt> OpContract::rule_sizes(size_t which, c10::ArrayRef<c10::IValue> args) const {
  const ShapeRule& rule = which == 0 ? def_->shape : def_->extra_outputs[which - 1];
  auto tensor = [&](size_t i) -> const at::Tensor& { return args[rule_positions_[which][i]].toTensor(); };
  switch (rule.kind) {
    case ShapeRuleKind::SameAs:
      return sizes_of(tensor(0));
    case ShapeRuleKind::Broadcast: {
      // Left to right; a message names the arguments (or the broadcast so far) that disagree.
      std::vector<c10::SymInt> sizes =
          broadcast_sizes(*this, rule.args[0], tensor(0).sym_sizes(), rule.args[1], tensor(1).sym_sizes());
      if (rule.args.size() == 2) return sizes;
      std::string so_far = rule.args[0] + "' and '" + rule.args[1];
      for (size_t i = 2; i < rule.args.size(); ++i) {
        sizes = broadcast_sizes(*this, so_far, sizes, rule.args[i], tensor(i).sym_sizes());
        so_far += "' and '" + rule.args[i];
      }
      return sizes;
    }
    case ShapeRuleKind::InPlace: {
      const at::Tensor& x = tensor(0);
      check_written(rule.args[0], x, args);
      return sizes_of(x);
    }
    case ShapeRuleKind::Out: {
      const at::Tensor& out = tensor(0);
      check_written(rule.args[0], out, args);
      const at::Tensor& like = tensor(1);
      bool same = out.dim() == like.dim();
      for (int64_t d = 0; same && d < out.dim(); ++d)
        same = out.sym_size(d).sym_eq(like.sym_size(d)).expect_true(__FILE__, __LINE__);
      TORCH_CHECK_VALUE(same, qualified_name_, ": argument '", rule.args[0], "' has sizes ", out.sym_sizes(),
                        ", expected ", like.sym_sizes(), " (the sizes of '", rule.args[1],
                        "'); allocate it with torch.empty_like (custom ops cannot resize an out argument under "
                        "torch.compile or torch.export)");
      return sizes_of(out);
    }
    case ShapeRuleKind::Custom:
      return find_custom_shape_rule(rule.custom)(*def_, args);
  }
  TORCH_INTERNAL_ASSERT(false, "unhandled shape rule");
}

at::Tensor OpContract::new_output(c10::ArrayRef<c10::IValue> args) const {
  return allocate(0, check(args), args);
}

std::vector<at::Tensor> OpContract::new_outputs(c10::ArrayRef<c10::IValue> args) const {
  std::vector<at::Tensor> outs{new_output(args)};
  for (size_t which = 1; which <= def_->extra_outputs.size(); ++which)
    outs.push_back(allocate(which, rule_sizes(which, args), args));
  return outs;
}

const at::Tensor* OpContract::layout_source(size_t which, c10::SymIntArrayRef sizes,
                                           c10::ArrayRef<c10::IValue> args) const {
  const ShapeRule& rule = which == 0 ? def_->shape : def_->extra_outputs[which - 1];
  // A broadcast output, and a custom one naming `layout: x`, may follow an input's layout.
  if (rule.kind != ShapeRuleKind::Broadcast && rule.kind != ShapeRuleKind::Custom) return nullptr;
  for (int pos : rule_positions_[which]) {
    const at::Tensor& t = args[pos].toTensor();
    if (t.dim() != static_cast<int64_t>(sizes.size())) continue;
    bool same = true;
    for (int64_t d = 0; same && d < t.dim(); ++d) same = TORCH_GUARD_OR_FALSE(t.sym_size(d).sym_eq(sizes[d]));
    if (same) return &t;
  }
  return nullptr;
}

at::Tensor OpContract::allocate(size_t which, const std::vector<c10::SymInt>& sizes,
                                c10::ArrayRef<c10::IValue> args) const {
  const at::Tensor& first = args[tensor_positions_[0]].toTensor();
  // A broadcast (elementwise) output follows a dense permuted input, as TensorIterator
  // lays out aten's: a transposed input gives a transposed output, and the kernel reads
  // and writes memory in one linear order. So does a custom rule's output that names its
  // layout source (rotary: q and k with their heads transposed).
  const at::Tensor* like = layout_source(which, sizes, args);
  if (like != nullptr && (like->is_contiguous() || !like->is_non_overlapping_and_dense())) like = nullptr;
  // On the CPU and on CUDA with concrete sizes, allocated as aten's own kernels allocate
  // their outputs (at::detail::empty_cpu, empty_cuda): from the device's allocator, with no
  // dispatcher round trip through BackendSelect and empty.memory_format: a visible share
  // of a small op's host time (bench/results/).
  if ((first.is_cpu() || first.is_cuda()) && has_memory_layout(first)) {
    if (const auto concrete = c10::asIntArrayRefSlowOpt(sizes)) {
      if (first.is_cpu())
        return empty_from(c10::GetCPUAllocator(), c10::DispatchKey::CPU, *concrete, like, first.scalar_type());
      // The allocator torch allocates CUDA tensors from, a pluggable one included
      // (torch.cuda.memory.change_current_allocator), which c10::GetAllocator(kCUDA) is
      // not. It allocates on the current device.
      const c10::DeviceGuard guard(first.device());
      return empty_from(at::detail::getCUDAHooks().getCUDADeviceAllocator(), c10::DispatchKey::CUDA, *concrete, like,
                        first.scalar_type());
    }
  }
  if (like != nullptr) return at::empty_strided_symint(sizes, like->sym_strides(), first.options());
  return at::empty_symint(sizes, first.options().memory_format(c10::MemoryFormat::Contiguous));
}

}  // namespace backplane
