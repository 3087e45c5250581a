// Registering a kernel: one line at the foot of the kernel's own file.
//
//   void add(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {...}
//   BACKPLANE_KERNEL(CUDA, add, add)
//
// The core wraps the compute function so that a kernel holds only its compute: the
// wrapper runs the op's contract (registry dtypes, one dtype and one device across the
// Tensor arguments, the shape rule), allocates the output, returns at once when there
// is nothing to compute, and holds a device guard for the tensors' device (so a kernel
// on cuda:1 launches on cuda:1's current stream). Outputs are contiguous, except those
// of broadcast rules (add, mul, silu_mul...): they take the strides of the first input of
// their sizes where that one is dense but permuted (a transposed input gives a
// transposed output, as aten's elementwise ops do), so such kernels must honour out's
// strides (TensorIterator and the out= ops of aten do). Two forms, by the op's shape rule:
//
//   BACKPLANE_KERNEL(KEY, op, fn)          the op returns a new tensor (same_as,
//                                          broadcast, custom rules):
//                                          fn(at::Tensor& out, <the op's arguments>)
//                                          or two (`shape:` a list of two rules, the
//                                          schema `-> (Tensor, Tensor)`):
//                                          fn(at::Tensor& out0, at::Tensor& out1, <args>)
//                                          The leading non-const at::Tensor& parameters
//                                          are the outputs; inputs are const at::Tensor&.
//   BACKPLANE_WRITING_KERNEL(KEY, op, fn)  the op writes an argument (in_place, out):
//                                          fn(<the op's arguments>)
//
// Both expand to TORCH_LIBRARY_IMPL(backplane, KEY, m): plugins register with the
// dispatcher as any PyTorch extension does, through the core, which can then choose
// between two plugins serving one device (selection.h). A kernel registered with a
// plain m.impl still works, but cannot take part in that choice. A signature that does not match the
// schema fails when the plugin is built (the build opens every plugin to write its
// manifest), with PyTorch's message naming both signatures.
#pragma once

#include <backplane/plugin/op_contract.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <vector>

namespace backplane {

// An op name as a template argument (C++20 class-type non-type parameter).
template <std::size_t N>
struct OpName {
  char value[N];
  constexpr OpName(const char (&name)[N]) { std::copy_n(name, N, value); }
};

namespace detail {

template <typename... Args>
std::array<c10::IValue, sizeof...(Args)> boxed(const Args&... args) {
  return {c10::IValue(args)...};
}

// The device of the first Tensor argument (the contract has already checked that every
// Tensor argument shares it).
template <typename... Args>
std::optional<c10::Device> first_device(const Args&... args) {
  std::optional<c10::Device> device;
  auto visit = [&](const auto& arg) {
    if constexpr (std::is_same_v<std::decay_t<decltype(arg)>, at::Tensor>)
      if (!device && arg.defined()) device = arg.device();
  };
  (visit(args), ...);
  return device;
}

// A device guard for the kernel's device; none on the CPU, where constructing one costs
// two virtual calls on every op call and switches nothing.
inline c10::OptionalDeviceGuard device_guard(std::optional<c10::Device> device) {
  if (device && !device->is_cpu()) return c10::OptionalDeviceGuard(*device);
  return c10::OptionalDeviceGuard();
}

inline bool has_no_elements(c10::ArrayRef<c10::SymInt> sizes) {
  for (const auto& s : sizes)
    if (s == 0) return true;
  return false;
}

// A boxed kernel's part of the wrapper (stable_kernels.cpp, the Python bridge of kind
// triton): runs the op's contract on its arguments and allocates its `outputs` new outputs
// into `outs` (none for an op that writes: `writes`). Returns whether anything is left to
// compute (false when every output, or the written argument, is empty).
inline bool boxed_contract(const OpContract& contract, bool writes, size_t outputs, c10::ArrayRef<c10::IValue> args,
                           std::vector<at::Tensor>& outs) {
  if (writes) return !has_no_elements(contract.check(args));
  outs = outputs == 1 ? std::vector<at::Tensor>{contract.new_output(args)} : contract.new_outputs(args);
  return std::any_of(outs.begin(), outs.end(), [](const at::Tensor& t) { return t.numel() > 0; });
}

// The device of the first defined Tensor among boxed arguments, for the device guard.
inline std::optional<c10::Device> first_boxed_device(c10::ArrayRef<c10::IValue> args) {
  for (const auto& a : args)
    if (a.isTensor() && a.toTensor().defined()) return a.toTensor().device();
  return std::nullopt;
}

// Function templates rather than class specializations on the signature: nvcc's front
// end does not match a partial specialization whose parameters include a class-type
// template argument (OpName).
template <OpName Op, auto Compute, typename... Args>
at::Tensor new_output_call(Args... args) {
  static const OpContract contract(Op.value);
  at::Tensor out = contract.new_output(boxed(args...));
  if (out.numel() == 0) return out;
  const auto guard = device_guard(out.device());
  Compute(out, args...);
  return out;
}

// Two outputs: the kernel runs unless both are empty (rms_norm_backward of no rows still
// gives dweight, zeros), so it must handle empty inputs where one output is not.
template <OpName Op, auto Compute, typename... Args>
std::tuple<at::Tensor, at::Tensor> two_output_call(Args... args) {
  static const OpContract contract(Op.value);
  std::vector<at::Tensor> outs = contract.new_outputs(boxed(args...));
  if (outs[0].numel() > 0 || outs[1].numel() > 0) {
    const auto guard = device_guard(outs[0].device());
    Compute(outs[0], outs[1], args...);
  }
  return {std::move(outs[0]), std::move(outs[1])};
}

template <OpName Op, auto Compute, typename... Args>
void writing_call(Args... args) {
  static const OpContract contract(Op.value);
  // For in_place and out rules the contract returns the written argument's sizes.
  if (has_no_elements(contract.check(boxed(args...)))) return;
  const auto guard = device_guard(first_device(args...));
  Compute(args...);
}

// How many leading parameters of a compute function are outputs (non-const at::Tensor&).
template <typename Fn>
struct OutputCount;
template <typename... Params>
struct OutputCount<void (*)(Params...)> {
  static constexpr std::size_t value = [] {
    constexpr bool is_output[] = {std::is_same_v<Params, at::Tensor&>..., false};
    std::size_t n = 0;
    while (is_output[n]) ++n;
    return n;
  }();
};

template <OpName Op, auto Compute, typename... Args>
constexpr auto one_output_pointer(void (*)(at::Tensor&, Args...)) {
  return &new_output_call<Op, Compute, Args...>;
}

template <OpName Op, auto Compute, typename... Args>
constexpr auto two_output_pointer(void (*)(at::Tensor&, at::Tensor&, Args...)) {
  return &two_output_call<Op, Compute, Args...>;
}

template <OpName Op, auto Compute, typename Fn>
constexpr auto new_output_pointer(Fn fn) {
  constexpr std::size_t outputs = OutputCount<Fn>::value;
  static_assert(outputs == 1 || outputs == 2,
                "a kernel returning new tensors starts with one or two outputs (at::Tensor&), then the op's "
                "arguments (const at::Tensor& for tensors)");
  if constexpr (outputs == 2)
    return two_output_pointer<Op, Compute>(fn);
  else
    return one_output_pointer<Op, Compute>(fn);
}

template <OpName Op, auto Compute, typename... Args>
constexpr auto writing_pointer(void (*)(Args...)) {
  return &writing_call<Op, Compute, Args...>;
}

// The function type of a function pointer (the CPU plugin's variant trampoline uses it).
template <typename Fn>
struct FunctionType;
template <typename R, typename... Args>
struct FunctionType<R (*)(Args...)> {
  using type = R(Args...);
};

}  // namespace detail

// The wrapped kernels, for a plugin that registers by hand or calls one directly.
template <OpName Op, auto Compute>
constexpr auto new_output_kernel = detail::new_output_pointer<Op, Compute>(Compute);
template <OpName Op, auto Compute>
constexpr auto writing_kernel = detail::writing_pointer<Op, Compute>(Compute);

}  // namespace backplane

namespace backplane::detail {

// Registers a kernel for (op, key) through the core rather than straight into the
// dispatcher (op: "ns::name", the namespace of m): the core records it under the plugin being loaded, refuses a key or op the
// plugin's manifest does not declare, and, when a second plugin offers the same (op, key),
// keeps both and installs one kernel that calls the preferred plugin's (selection.h).
BACKPLANE_API void offer_kernel(torch::Library& m, const char* op, c10::DispatchKey key, c10::KernelFunction kernel,
                                torch::CppFunction&& direct);

// How many kernels have registered through offer_kernel in this process (the manifest
// tool tells core registrations from plain m.impl ones with it).
BACKPLANE_API std::size_t core_registrations();

template <typename FuncPtr>
void register_kernel(torch::Library& m, const char* op, c10::DispatchKey key, FuncPtr fn) {
  offer_kernel(m, op, key, c10::KernelFunction::makeFromUnboxedFunction(fn), torch::CppFunction(fn));
}

}  // namespace backplane::detail

// fn: a function name, or a constexpr pointer to one.
#define BACKPLANE_KERNEL(KEY, op, fn) BACKPLANE_NS_KERNEL(backplane, KEY, op, fn)
#define BACKPLANE_WRITING_KERNEL(KEY, op, fn) BACKPLANE_NS_WRITING_KERNEL(backplane, KEY, op, fn)

// The same for an op of a plugin's own registry fragment (vendor_ops.h), in namespace NS:
//   BACKPLANE_NS_KERNEL(acme, CPU, fused_gelu, fused_gelu_cpu)
#define BACKPLANE_NS_KERNEL(NS, KEY, op, fn)                                                         \
  TORCH_LIBRARY_IMPL(NS, KEY, m) {                                                                   \
    constexpr auto kernel = ::backplane::new_output_kernel<#NS "::" #op, fn>;                       \
    ::backplane::detail::register_kernel(m, #NS "::" #op, c10::DispatchKey::KEY, TORCH_FN(kernel));  \
  }
#define BACKPLANE_NS_WRITING_KERNEL(NS, KEY, op, fn)                                                 \
  TORCH_LIBRARY_IMPL(NS, KEY, m) {                                                                   \
    constexpr auto kernel = ::backplane::writing_kernel<#NS "::" #op, fn>;                          \
    ::backplane::detail::register_kernel(m, #NS "::" #op, c10::DispatchKey::KEY, TORCH_FN(kernel));  \
  }
