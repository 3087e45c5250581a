// The CPU fallback while a graph captures (npu_graph.h): the eager fallback copies its
// inputs to the host and waits, which a capture refuses, so instead the op's outputs are
// shaped by its Meta kernel and allocated now, and the CPU kernel is queued on the
// capturing stream, run over host views of the npu tensors (as the device's own kernels
// are): in stream order, at every replay.
// Limits: the op needs a Meta kernel that gives its output shapes without reading its
// inputs (not nonzero, unique, masked_select); it must return tensors (an op returning a
// number is a host read); CPU tensors among its arguments (0-dim scalars) are taken as
// they are at capture, as CUDA graphs do; out= arguments of another shape are given new
// memory at capture.
#include "device/launch.h"
#include "device/npu_graph.h"

#include <ATen/ops/empty_strided.h>
#include <c10/util/Exception.h>

#include <string>
#include <utility>
#include <vector>

namespace backplane::npu {
namespace {

// `value` with each defined tensor in it (alone or in a list) replaced by fn(tensor).
template <typename Fn>
c10::IValue map_tensors(const c10::IValue& value, const Fn& fn) {
  if (value.isTensor()) return value.toTensor().defined() ? c10::IValue(fn(value.toTensor())) : value;
  if (!value.isList()) return value;
  const c10::List<c10::IValue> list = value.toList();
  c10::impl::GenericList mapped(list.elementType());
  mapped.reserve(list.size());
  for (const c10::IValue& item : list) mapped.push_back(map_tensors(item, fn));
  return mapped;
}

// The argument a return aliases (an in-place or out= op), or -1 for a fresh output.
int aliased_argument(const c10::FunctionSchema& schema, size_t ret) {
  const c10::AliasInfo* info = schema.returns()[ret].alias_info();
  if (info == nullptr || !info->isWrite()) return -1;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::AliasInfo* arg = schema.arguments()[i].alias_info();
    if (arg != nullptr && arg->beforeSets() == info->beforeSets()) return static_cast<int>(i);
  }
  return -1;
}

void check_tensors_only(const std::string& op, const c10::IValue& result) {
  const bool tensors = result.isTensor() || result.isNone() ||
                       (result.isList() && [&] {
                         for (const c10::IValue& item : result.toListRef())
                           if (!item.isTensor() && !item.isNone()) return false;
                         return true;
                       }());
  TORCH_CHECK(tensors, "backplane npu: ", op, " returns a ", result.tagKind(),
              ", which the host would have to read; that cannot be captured in a graph (expected an op whose "
              "results are tensors)");
}

// Copies each fresh output's CPU result into its npu memory (tensors, or lists of them).
void store(const c10::IValue& npu, const c10::IValue& cpu) {
  if (npu.isTensor()) {
    if (npu.toTensor().defined()) host_view(npu.toTensor()).copy_(cpu.toTensor());
    return;
  }
  if (!npu.isList()) return;
  const auto targets = npu.toListRef();
  const auto results = cpu.toListRef();
  TORCH_CHECK(targets.size() == results.size(), "backplane npu: the CPU kernel returned ", results.size(),
              " tensors where its Meta kernel gave ", targets.size());
  for (size_t i = 0; i < targets.size(); ++i) store(targets[i], results[i]);
}

}  // namespace

void captured_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::Device device) {
  const c10::FunctionSchema& schema = op.schema();
  const std::string name = schema.overload_name().empty() ? schema.name() : schema.name() + "." + schema.overload_name();
  TORCH_CHECK(!op.hasTag(at::Tag::nondeterministic_seeded), "backplane npu: ", name,
              " has no npu kernel and draws random numbers; while a graph captures, the CPU fallback cannot run "
              "it (a replay would not draw as eager does); expected an npu kernel for it, or the op outside the "
              "capture");
  const size_t count = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(count), stack->end());
  torch::jit::drop(*stack, count);

  // Output shapes: the Meta kernel, over meta copies of the npu arguments.
  std::vector<c10::IValue> meta_args;
  torch::jit::Stack meta;
  for (const c10::IValue& arg : args) {
    meta_args.push_back(map_tensors(arg, [](const at::Tensor& t) {
      return is_npu(t) ? at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta)) : t;
    }));
    meta.push_back(meta_args.back());
  }
  try {
    op.callBoxed(&meta);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "backplane npu: ", name, " has no npu kernel; while a graph captures, the CPU fallback "
                "needs its output shapes before its inputs are computed, and its Meta kernel gave none: ",
                e.what_without_backtrace());
  }
  // out= arguments the Meta kernel resized get fresh npu memory of the new shape now (set_,
  // not resize_: resize_ keeps the old bytes, which waits for the stream; an out= argument's
  // old bytes are all overwritten).
  for (size_t i = 0; i < count; ++i) {
    if (!schema.arguments()[i].is_out() || !args[i].isTensor() || !args[i].toTensor().defined()) continue;
    at::Tensor target = args[i].toTensor();
    const at::Tensor& shaped = meta_args[i].toTensor();
    if (is_npu(target) && (target.sizes() != shaped.sizes() || target.strides() != shaped.strides()))
      target.set_(at::empty_strided(shaped.sizes(), shaped.strides(), target.options()));
  }
  std::vector<c10::IValue> outputs;  // what the op returns: arguments it aliases, or fresh npu tensors
  std::vector<bool> fresh;
  for (size_t r = 0; r < meta.size(); ++r) {
    const int alias = aliased_argument(schema, r);
    fresh.push_back(alias < 0);
    if (alias >= 0) {
      outputs.push_back(args[alias]);
      continue;
    }
    check_tensors_only(name, meta[r]);
    outputs.push_back(map_tensors(meta[r], [&](const at::Tensor& m) {
      return at::empty_strided(m.sizes(), m.strides(), m.options().device(device));
    }));
  }

  // out= arguments reach the CPU kernel as CPU tensors of their own, stored afterwards:
  // some kernels resize their out= argument on the way (mse_loss.out), which a host view
  // over device memory cannot be. Other arguments are host views, written in place.
  std::vector<bool> is_out;
  for (const c10::Argument& argument : schema.arguments()) is_out.push_back(argument.is_out());
  launch(device.index(), name + " (CPU fallback, captured)", [op, args, outputs, fresh, is_out] {
    torch::jit::Stack cpu;
    for (size_t i = 0; i < args.size(); ++i)
      cpu.push_back(map_tensors(args[i], [&](const at::Tensor& t) {
        return is_out[i] && is_npu(t) ? at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kCPU))
                                      : host_view(t);
      }));
    std::vector<c10::IValue> cpu_args(cpu.begin(), cpu.end());
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
    for (size_t i = 0; i < args.size(); ++i)
      if (is_out[i]) store(args[i], cpu_args[i]);
    for (size_t r = 0; r < outputs.size(); ++r)
      if (fresh[r]) store(outputs[r], cpu[r]);
  });
  for (c10::IValue& out : outputs) stack->push_back(std::move(out));
}

}  // namespace backplane::npu
