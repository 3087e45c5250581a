// The core's side of stable_api.h: a stable plugin's kernel becomes a boxed kernel of the
// core that runs the op contract, allocates the outputs, holds the device guard and calls
// the plugin's C function with [outputs..., arguments...] as stable values. It is offered
// through detail::offer_kernel, so the loader checks it against the plugin's manifest and
// the core's per-op selection (selection.h) can choose between it and another plugin's.
#include <backplane/plugin/kernel.h>
#include "plugins/manifest.h"
#include <backplane/plugin/op_contract.h>
#include <backplane/plugin_abi.h>
#include <backplane/plugin/stable_api.h>

#include "plugins/stable_kernels.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace backplane::detail {
namespace {

thread_local std::string last_error_message;

// The argument kinds a stable value carries (stable_api.h); any other is refused when the
// kernel is offered, naming the argument. Version 1 plugins get the first four only.
using Kind = BackplaneStableKind;

std::optional<Kind> kind_of(const c10::Argument& arg) {
  switch (arg.type()->kind()) {
    case c10::TypeKind::TensorType: return BACKPLANE_STABLE_TENSOR;
    case c10::TypeKind::IntType: return BACKPLANE_STABLE_INT;
    case c10::TypeKind::FloatType: return BACKPLANE_STABLE_FLOAT;
    case c10::TypeKind::BoolType: return BACKPLANE_STABLE_BOOL;
    case c10::TypeKind::NumberType: return BACKPLANE_STABLE_SCALAR;
    case c10::TypeKind::ListType:
      if (arg.type()->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::IntType)
        return BACKPLANE_STABLE_INT_LIST;
      return std::nullopt;
    default: return std::nullopt;
  }
}

// The C++ parameter type a plugin writes for a kind (stable_kernel.h), for messages.
const char* parameter_type(int32_t kind) {
  switch (kind) {
    case BACKPLANE_STABLE_TENSOR: return "torch::stable::Tensor";
    case BACKPLANE_STABLE_INT: return "int64_t";
    case BACKPLANE_STABLE_FLOAT: return "double";
    case BACKPLANE_STABLE_BOOL: return "bool";
    case BACKPLANE_STABLE_SCALAR: return "backplane::stable::Scalar";
    case BACKPLANE_STABLE_INT_LIST: return "backplane::stable::IntList";
    default: return "a kind this core does not know";
  }
}

// The kinds of `schema`'s arguments for a plugin of interface `version`, each checked
// against `declared` (the kernel's own, version 2; nullptr for version 1, which declares
// only a count).
std::vector<Kind> argument_kinds(const c10::FunctionSchema& schema, const std::string& op, int version,
                                 const int32_t* declared) {
  std::vector<Kind> kinds;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::Argument& arg = schema.arguments()[i];
    const auto kind = kind_of(arg);
    if (!kind || (version < 2 && *kind > BACKPLANE_STABLE_BOOL))
      throw std::invalid_argument(
          op + ": argument '" + arg.name() + "' is " + arg.type()->str() + "; the stable kernel path " +
          (version < 2 ? "carries Tensor, int, float and bool arguments to a plugin built against its interface "
                         "version 1 (version 2 adds Scalar and int[]: rebuild the plugin against this Backplane's "
                         "stable_kernel.h)"
                       : "carries Tensor, int, float, bool, Scalar and int[] arguments"));
    if (declared != nullptr && declared[i] != *kind)
      throw std::invalid_argument(op + ": argument '" + arg.name() + "' is " + arg.type()->str() +
                                  ", the kernel's parameter for it is " + parameter_type(declared[i]) +
                                  " (expected " + parameter_type(*kind) + ")");
    kinds.push_back(*kind);
  }
  return kinds;
}

// A Scalar argument as it crosses (stable_api.h).
BackplaneStableScalar stable_scalar(const c10::IValue& value, const std::string& op) {
  const c10::Scalar s = value.toScalar();
  BackplaneStableScalar out{BACKPLANE_STABLE_SCALAR_DOUBLE, 0, 0};
  if (s.isBoolean()) {
    out.type = BACKPLANE_STABLE_SCALAR_BOOL;
    out.bits = s.toBool() ? 1 : 0;
  } else if (s.isIntegral(false) && !(s.isUnsigned() && s.toUInt64() > uint64_t{INT64_MAX})) {
    out.type = BACKPLANE_STABLE_SCALAR_INT;
    out.bits = static_cast<uint64_t>(s.toLong());
  } else if (s.isFloatingPoint() || s.isIntegral(false)) {
    // An integer past int64 (Python's 2**63 .. 2**64-1, an unsigned Scalar) crosses as the
    // nearest double: what the full-ABI kernels compute with, reading it in a floating
    // tensor's opmath (every registry op with a Scalar takes floating tensors only).
    // Limit: such a value is a double on the stable path; to<int64_t>() of it is out of range.
    const double d = s.toDouble();
    std::memcpy(&out.bits, &d, sizeof d);
  } else {
    TORCH_CHECK(false, op, ": a stable kernel takes a real Scalar (float, int or bool), found ", s.type());
  }
  return out;
}

// The device's current stream as its runtime's handle (cudaStream_t on CUDA); NULL for a
// device whose runtime gives none (c10::Stream::native_handle throws for those).
void* native_stream(c10::Device device) {
  try {
    return c10::impl::getDeviceGuardImpl(device.type())->getStream(device).native_handle();
  } catch (const c10::Error&) {
    return nullptr;
  }
}

class StableKernel final : public c10::OperatorKernel {
 public:
  StableKernel(const OpDef& def, std::vector<Kind> kinds, BackplaneStableKernel fn)
      : contract_(def.qualified_name()), writes_(def.writes()), kinds_(std::move(kinds)), fn_(fn) {
    outputs_ = writes_ ? 0 : def.new_outputs();
    scalars_ = std::count(kinds_.begin(), kinds_.end(), BACKPLANE_STABLE_SCALAR);
    lists_ = std::count(kinds_.begin(), kinds_.end(), BACKPLANE_STABLE_INT_LIST);
  }

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t n = kinds_.size();
    auto args = torch::jit::last(*stack, n);
    std::vector<at::Tensor> outs;
    if (boxed_contract(contract_, writes_, outputs_, args, outs)) call(args, outs);
    torch::jit::drop(*stack, n);
    for (auto& out : outs) stack->emplace_back(std::move(out));
  }

 private:
  void call(c10::ArrayRef<c10::IValue> args, std::vector<at::Tensor>& outs) const {
    const std::optional<c10::Device> device = first_boxed_device(args);
    const auto guard = device_guard(device);
    BackplaneStableCall ctx{sizeof(BackplaneStableCall), 0, -1, nullptr};
    if (device) {
      ctx.device_type = static_cast<int32_t>(device->type());
      ctx.device_index = device->has_index() ? device->index() : -1;
      if (!device->is_cpu()) ctx.stream = native_stream(*device);
    }
    // Borrowed handles: an AtenTensorHandle is an at::Tensor*, alive for the call; a Scalar
    // or an int[] is the address of its struct here (reserved up front: never moved). Inline
    // buffers: a call of the registry's sizes allocates nothing on the heap here.
    c10::SmallVector<uint64_t, 12> values;
    values.reserve(outs.size() + args.size());
    c10::SmallVector<BackplaneStableScalar, 2> scalars;
    c10::SmallVector<c10::SmallVector<int64_t, 8>, 2> int_lists;
    c10::SmallVector<BackplaneStableIntList, 2> lists;
    scalars.reserve(scalars_);
    int_lists.reserve(lists_);
    lists.reserve(lists_);
    for (auto& out : outs) values.push_back(reinterpret_cast<uint64_t>(&out));
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::IValue& a = args[i];
      switch (kinds_[i]) {
        case BACKPLANE_STABLE_TENSOR: values.push_back(reinterpret_cast<uint64_t>(&a.toTensor())); break;
        case BACKPLANE_STABLE_INT: values.push_back(static_cast<uint64_t>(a.toInt())); break;
        case BACKPLANE_STABLE_BOOL: values.push_back(a.toBool() ? 1 : 0); break;
        case BACKPLANE_STABLE_FLOAT: {
          const double d = a.toDouble();
          uint64_t bits;
          std::memcpy(&bits, &d, sizeof bits);
          values.push_back(bits);
          break;
        }
        case BACKPLANE_STABLE_SCALAR:
          scalars.push_back(stable_scalar(a, contract_.qualified_name()));
          values.push_back(reinterpret_cast<uint64_t>(&scalars.back()));
          break;
        case BACKPLANE_STABLE_INT_LIST:
          int_lists.emplace_back();
          for (const int64_t v : a.toIntList()) int_lists.back().push_back(v);
          lists.push_back({int_lists.back().data(), int_lists.back().size()});
          values.push_back(reinterpret_cast<uint64_t>(&lists.back()));
          break;
      }
    }
    if (const char* error = fn_(&ctx, values.data(), outs.size(), args.size()))
      TORCH_CHECK(false, contract_.qualified_name(), ": ", error);
  }

  OpContract contract_;
  bool writes_;
  size_t outputs_ = 1;
  std::vector<Kind> kinds_;
  size_t scalars_ = 0, lists_ = 0;  // how many of kinds_ are Scalar, int[]
  BackplaneStableKernel fn_;
};

// Registers fn for op on dispatch_key; `version` and `declared` as argument_kinds takes
// them. Throws, saying why, where it cannot serve.
void register_kernel(const char* op, const char* dispatch_key, BackplaneStableKernel fn, uint64_t target, int version,
                     const BackplaneStableKernelInfo* declared) {
  const OpDef* def = find_op_def(op);
  if (def == nullptr) throw std::invalid_argument(std::string("no op '") + op + "' in the registry or a loaded fragment");
  const c10::DispatchKey key = c10::parseDispatchKey(dispatch_key);
  const auto handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(def->qualified_name(), ""));
  if (!handle) throw std::invalid_argument(def->qualified_name() + " is not defined in this process");
  const int target_major = static_cast<int>((target >> 56) & 0xff), target_minor = static_cast<int>((target >> 48) & 0xff);
  const auto here = major_minor(torch_major_minor());
  if (here && std::make_pair(target_major, target_minor) > *here)
    throw std::invalid_argument("built with TORCH_TARGET_VERSION " + std::to_string(target_major) + "." +
                                std::to_string(target_minor) + ", later than this process's torch " +
                                torch_major_minor());
  const c10::FunctionSchema& schema = handle->schema();
  const size_t outputs = def->writes() ? 0 : def->new_outputs();
  if (declared != nullptr && (declared->num_outputs != outputs || declared->num_params != schema.arguments().size()))
    throw std::invalid_argument(def->qualified_name() + ": the kernel takes " + std::to_string(declared->num_outputs) +
                                " output(s) and " + std::to_string(declared->num_params) +
                                " argument(s), the op's schema has " + std::to_string(outputs) + " and " +
                                std::to_string(schema.arguments().size()));
  const auto kinds =
      argument_kinds(schema, def->qualified_name(), version, declared ? declared->param_kinds : nullptr);
  // One library object per offer, kept for the process: the registration lives as long.
  static std::mutex mutex;
  static auto* libraries = new std::list<torch::Library>();
  std::lock_guard<std::mutex> lock(mutex);
  torch::Library& m = libraries->emplace_back(torch::Library::IMPL, def->ns, key, __FILE__, __LINE__);
  offer_kernel(m, def->qualified_name().c_str(), key,
               c10::KernelFunction::makeFromBoxedFunctor(std::make_unique<StableKernel>(*def, kinds, fn)),
               torch::CppFunction::makeFromBoxedFunctor(std::make_unique<StableKernel>(*def, kinds, fn)));
}

// Runs body, turning a throw into 1 and last_error()'s message.
template <typename Body>
int32_t reporting(Body&& body) {
  try {
    body();
    return 0;
  } catch (const c10::Error& e) {
    last_error_message = e.what_without_backtrace();
  } catch (const std::exception& e) {
    last_error_message = e.what();
  }
  return 1;
}

int32_t offer(const char* op, const char* dispatch_key, BackplaneStableKernel fn, uint64_t target) {
  return reporting([&] { register_kernel(op, dispatch_key, fn, target, 1, nullptr); });
}

int32_t offer_typed(const BackplaneStableKernelInfo* kernel) {
  return reporting([&] {
    if (kernel == nullptr || kernel->struct_size < sizeof(BackplaneStableKernelInfo))
      throw std::invalid_argument("a kernel offered with a BackplaneStableKernelInfo smaller than version 2's");
    register_kernel(kernel->op, kernel->dispatch_key, kernel->fn, kernel->torch_target_version, 2, kernel);
  });
}

const char* last_error() { return last_error_message.c_str(); }

const BackplaneStableApi kApi = {sizeof(BackplaneStableApi), BACKPLANE_STABLE_API_VERSION, 0, &offer, &last_error,
                                 &offer_typed};

}  // namespace

const BackplaneStableApi* stable_api() { return &kApi; }

std::optional<std::string> init_stable_plugin(void* handle) {
  auto init = reinterpret_cast<BackplaneStablePluginInit>(dlsym(handle, BACKPLANE_STABLE_PLUGIN_INIT));
  if (init == nullptr)
    return std::string("its manifest says torch_abi: stable, and it exports no ") + BACKPLANE_STABLE_PLUGIN_INIT +
           " (build its kernels with BACKPLANE_STABLE_KERNEL, backplane/plugin/stable_kernel.h)";
  if (const char* error = init(stable_api())) return std::string("its stable kernels were refused: ") + error;
  return std::nullopt;
}

}  // namespace backplane::detail
