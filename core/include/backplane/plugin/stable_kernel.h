// Kernels on PyTorch's stable ABI: one plugin binary for the torch it targets and every
// later one (docs/shipping-a-plugin.md). The plugin's side of stable_api.h; it includes
// only torch/csrc/stable, torch/headeronly and that C header, never libtorch's C++ API.
//
//   #include <backplane/plugin/stable_kernel.h>
//   void mul(torch::stable::Tensor& out, const torch::stable::Tensor& a, const torch::stable::Tensor& b) {...}
//   BACKPLANE_STABLE_KERNEL(CPU, mul, mul)
//   BACKPLANE_STABLE_WRITING_KERNEL(CPU, scale_, scale)   // fn(torch::stable::Tensor& x, double s)
//
// As with BACKPLANE_KERNEL (kernel.h), the core runs the op's contract, allocates the
// outputs (contiguous, or the strides of a dense permuted input for broadcast rules: use
// out's strides), returns at once when there is nothing to compute and holds the device
// guard; the kernel keeps only its compute. Arguments, as the schema has them: Tensor as
// const torch::stable::Tensor& (the written one of an in-place or out op:
// torch::stable::Tensor&), float as double, int as int64_t, bool, Scalar as
// const backplane::stable::Scalar&, int[] as backplane::stable::IntList. The core checks
// each parameter's type against the schema when the plugin loads and refuses a mismatch,
// naming the argument. A kernel may throw (STD_TORCH_CHECK): the message reaches the
// caller as a RuntimeError.
// On CUDA, launch on backplane::stable::current_stream().
//
// Build with -DTORCH_TARGET_VERSION=<the oldest torch it runs under> (cmake:
// backplane_add_plugin(... STABLE_ABI TORCH_TARGET 2.13)); the manifest records it and the
// loader refuses an older torch, naming both.
#pragma once

#include <backplane/plugin/stable_api.h>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/Exception.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef TORCH_TARGET_VERSION
#error "build a stable-ABI plugin with -DTORCH_TARGET_VERSION (backplane_add_plugin(... STABLE_ABI TORCH_TARGET X.Y))"
#endif

namespace backplane::stable {

// A Scalar argument (add's alpha): a double, an int64_t or a bool, as the caller gave it.
// to<T>() converts as c10::Scalar::to does (T: double, float, int64_t, torch::headeronly's
// Half and BFloat16, ...): compute in the op's math type, e.g. to<float>() for bfloat16.
class Scalar {
 public:
  explicit Scalar(const BackplaneStableScalar& value) : value_(value) {}
  bool is_floating_point() const { return value_.type == BACKPLANE_STABLE_SCALAR_DOUBLE; }
  bool is_integral() const { return value_.type == BACKPLANE_STABLE_SCALAR_INT; }
  bool is_bool() const { return value_.type == BACKPLANE_STABLE_SCALAR_BOOL; }

  template <typename T>
  T to() const {
    switch (value_.type) {
      case BACKPLANE_STABLE_SCALAR_DOUBLE: {
        double d;
        std::memcpy(&d, &value_.bits, sizeof d);
        return static_cast<T>(d);
      }
      case BACKPLANE_STABLE_SCALAR_INT: return static_cast<T>(static_cast<int64_t>(value_.bits));
      default: return static_cast<T>(value_.bits != 0);
    }
  }

 private:
  BackplaneStableScalar value_;
};

// An int[] argument (crop's box): a view of the core's values for the call.
class IntList {
 public:
  explicit IntList(const BackplaneStableIntList& list) : data_(list.data), size_(static_cast<size_t>(list.size)) {}
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  int64_t operator[](size_t i) const { return data_[i]; }

 private:
  const int64_t* data_;
  size_t size_;
};

namespace detail {

inline thread_local const BackplaneStableCall* current_call = nullptr;

struct Offer {
  const char* op;   // "backplane::mul"
  const char* key;  // "CPU"
  BackplaneStableKernel fn;
  uint32_t outputs;                  // leading torch::stable::Tensor& outputs
  std::vector<int32_t> param_kinds;  // BackplaneStableKind of each argument after them
};

// This plugin's kernels, in the order its static initializers offered them (one list per
// library: hidden visibility keeps it the plugin's own).
inline std::vector<Offer>& offers() {
  static std::vector<Offer> list;
  return list;
}

struct Register {
  Register(const char* op, const char* key, BackplaneStableKernel fn, uint32_t outputs, std::vector<int32_t> kinds) {
    offers().push_back({op, key, fn, outputs, std::move(kinds)});
  }
};

// The kind a parameter of C++ type T declares (stable_api.h's BackplaneStableKind).
template <typename T, typename U = std::remove_cv_t<std::remove_reference_t<T>>>
constexpr int32_t kind_of() {
  if constexpr (std::is_same_v<U, torch::stable::Tensor>) {
    return BACKPLANE_STABLE_TENSOR;
  } else if constexpr (std::is_same_v<U, int64_t>) {
    return BACKPLANE_STABLE_INT;
  } else if constexpr (std::is_same_v<U, double>) {
    return BACKPLANE_STABLE_FLOAT;
  } else if constexpr (std::is_same_v<U, bool>) {
    return BACKPLANE_STABLE_BOOL;
  } else if constexpr (std::is_same_v<U, Scalar>) {
    return BACKPLANE_STABLE_SCALAR;
  } else if constexpr (std::is_same_v<U, IntList>) {
    return BACKPLANE_STABLE_INT_LIST;
  } else {
    static_assert(sizeof(U) == 0,
                  "a stable kernel takes torch::stable::Tensor, double, int64_t, bool, backplane::stable::Scalar or "
                  "backplane::stable::IntList");
    return 0;
  }
}

// A borrowed handle from the core as an owning stable Tensor (the Tensor deletes the
// handle it owns; the core's tensor lives on).
inline torch::stable::Tensor tensor_at(uint64_t bits) {
  AtenTensorHandle owned = nullptr;
  STD_TORCH_CHECK(aoti_torch_new_tensor_handle(reinterpret_cast<AtenTensorHandle>(bits), &owned) == AOTI_TORCH_SUCCESS,
                  "backplane: a tensor handle from the core could not be taken");
  return torch::stable::Tensor(owned);
}

template <typename T, typename U = std::remove_cv_t<std::remove_reference_t<T>>>
U value_at(uint64_t bits) {  // by value: a const T& parameter binds to it for the call
  if constexpr (std::is_same_v<U, torch::stable::Tensor>) {
    return tensor_at(bits);
  } else if constexpr (std::is_same_v<U, double>) {
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  } else if constexpr (std::is_same_v<U, int64_t>) {
    return static_cast<int64_t>(bits);
  } else if constexpr (std::is_same_v<U, bool>) {
    return bits != 0;
  } else if constexpr (std::is_same_v<U, Scalar>) {
    return Scalar(*reinterpret_cast<const BackplaneStableScalar*>(bits));
  } else {
    static_assert(std::is_same_v<U, IntList>, "a stable kernel's parameter types: see kind_of");
    return IntList(*reinterpret_cast<const BackplaneStableIntList*>(bits));
  }
}

// Runs compute, turning a throw into the message the core raises.
template <typename Body>
const char* guarded(const BackplaneStableCall* call, uint64_t got_outputs, uint64_t want_outputs, uint64_t got_args,
                    uint64_t want_args, Body&& body) {
  static thread_local std::string error;
  try {
    STD_TORCH_CHECK(got_outputs == want_outputs && got_args == want_args, "the kernel takes ", want_outputs,
                    " output(s) and ", want_args, " argument(s), the op's schema has ", got_outputs, " and ", got_args);
    current_call = call;
    body();
    current_call = nullptr;
    return nullptr;
  } catch (const std::exception& e) {
    current_call = nullptr;
    error = e.what();
    return error.c_str();
  }
}

template <typename Fn>
struct Signature;
template <typename... Params>
struct Signature<void (*)(Params...)> {
  // Leading torch::stable::Tensor& parameters of a new-output kernel are its outputs.
  static constexpr std::size_t outputs = [] {
    constexpr bool is_output[] = {std::is_same_v<Params, torch::stable::Tensor&>..., false};
    std::size_t n = 0;
    while (is_output[n]) ++n;
    return n;
  }();

  // The kinds of the parameters after the first `Outputs`.
  template <std::size_t Outputs>
  static std::vector<int32_t> kinds() {
    const std::vector<int32_t> all = {kind_of<Params>()...};
    return std::vector<int32_t>(all.begin() + Outputs, all.end());
  }

  template <auto Compute, std::size_t Outputs, std::size_t... I>
  static void call(const uint64_t* stack, std::index_sequence<I...>) {
    // Every parameter from its slot; outputs first, as the core lays them out.
    std::tuple<std::remove_cv_t<std::remove_reference_t<Params>>...> values{value_at<Params>(stack[I])...};
    Compute(std::get<I>(values)...);
  }

  template <auto Compute, std::size_t Outputs>
  static const char* boxed(const BackplaneStableCall* ctx, const uint64_t* stack, uint64_t num_outputs,
                           uint64_t num_args) {
    return guarded(ctx, num_outputs, Outputs, num_args, sizeof...(Params) - Outputs,
                   [&] { call<Compute, Outputs>(stack, std::index_sequence_for<Params...>{}); });
  }
};

}  // namespace detail

// The call being served: its device and stream (valid inside a kernel only).
inline void* current_stream() { return detail::current_call ? detail::current_call->stream : nullptr; }
inline int32_t current_device_index() { return detail::current_call ? detail::current_call->device_index : -1; }

}  // namespace backplane::stable

// Offers every kernel of this plugin: with its parameter kinds where the core has version
// 2's offer_typed_kernel, else (a version-1 core) through offer_kernel where the kernel
// takes only version 1's kinds.
extern "C" __attribute__((weak, visibility("default"))) const char* backplane_stable_plugin_init(
    const BackplaneStableApi* api) {
  static std::string error;
  constexpr uint64_t kVersion1Size = offsetof(BackplaneStableApi, last_error) + sizeof(BackplaneStableApi::last_error);
  constexpr uint64_t kVersion2Size =
      offsetof(BackplaneStableApi, offer_typed_kernel) + sizeof(BackplaneStableApi::offer_typed_kernel);
  if (api == nullptr || api->struct_size < kVersion1Size)
    return "this Backplane core's stable kernel interface is older than version 1";
  const bool typed = api->struct_size >= kVersion2Size && api->offer_typed_kernel != nullptr;
  for (const auto& o : backplane::stable::detail::offers()) {
    int32_t refused = 0;
    if (typed) {
      const BackplaneStableKernelInfo info = {sizeof(BackplaneStableKernelInfo), o.op, o.key, o.fn,
                                              TORCH_TARGET_VERSION, o.outputs,
                                              static_cast<uint32_t>(o.param_kinds.size()), o.param_kinds.data()};
      refused = api->offer_typed_kernel(&info);
    } else {
      for (int32_t kind : o.param_kinds)
        if (kind > BACKPLANE_STABLE_BOOL) {
          error = std::string(o.op) + " on " + o.key + ": its kernel takes a Scalar or int[] argument, which needs " +
                  "Backplane's stable kernel interface version 2; this core has version " +
                  std::to_string(api->version);
          return error.c_str();
        }
      refused = api->offer_kernel(o.op, o.key, o.fn, TORCH_TARGET_VERSION);
    }
    if (refused != 0) {
      error = std::string(o.op) + " on " + o.key + ": " + api->last_error();
      return error.c_str();
    }
  }
  return nullptr;
}

#define BACKPLANE_STABLE_CAT_(a, b) a##b
#define BACKPLANE_STABLE_CAT(a, b) BACKPLANE_STABLE_CAT_(a, b)
#define BACKPLANE_STABLE_REGISTER_(NS, KEY, op, fn, outputs)                                                     \
  static const ::backplane::stable::detail::Register BACKPLANE_STABLE_CAT(backplane_stable_kernel_, __COUNTER__)( \
      #NS "::" #op, #KEY, &::backplane::stable::detail::Signature<decltype(&fn)>::template boxed<&fn, outputs>,  \
      outputs, ::backplane::stable::detail::Signature<decltype(&fn)>::template kinds<outputs>());

// fn(torch::stable::Tensor& out[, torch::stable::Tensor& out2], <the op's arguments>)
#define BACKPLANE_STABLE_KERNEL(KEY, op, fn) \
  BACKPLANE_STABLE_REGISTER_(backplane, KEY, op, fn, ::backplane::stable::detail::Signature<decltype(&fn)>::outputs)
// fn(<the op's arguments>), the written one as torch::stable::Tensor&
#define BACKPLANE_STABLE_WRITING_KERNEL(KEY, op, fn) BACKPLANE_STABLE_REGISTER_(backplane, KEY, op, fn, 0)
// A plugin's own op (vendor_ops.h), in namespace NS
#define BACKPLANE_STABLE_NS_KERNEL(NS, KEY, op, fn) \
  BACKPLANE_STABLE_REGISTER_(NS, KEY, op, fn, ::backplane::stable::detail::Signature<decltype(&fn)>::outputs)
