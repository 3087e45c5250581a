// The core's side of stable_api.h: a stable plugin's kernel becomes a boxed kernel of the
// core that runs the op contract, allocates the outputs, holds the device guard and calls
// the plugin's C function with [outputs..., arguments...] as stable values. It is offered
// through detail::offer_kernel, so the loader checks it against the plugin's manifest and
// the core's per-op selection (selection.h) can choose between it and another plugin's.
#include <backplane/kernel.h>
#include <backplane/manifest.h>
#include <backplane/op_contract.h>
#include <backplane/plugin_abi.h>
#include <backplane/stable_api.h>

#include "plugins/stable_kernels.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
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

namespace backplane::detail {
namespace {

thread_local std::string last_error_message;

// The argument types a stable value carries (stable_api.h); anything else is refused
// when the kernel is offered, naming the argument.
enum class Carried { Tensor, Int, Float, Bool };

Carried carried(const c10::Argument& arg, const std::string& op) {
  switch (arg.type()->kind()) {
    case c10::TypeKind::TensorType: return Carried::Tensor;
    case c10::TypeKind::IntType: return Carried::Int;
    case c10::TypeKind::FloatType: return Carried::Float;
    case c10::TypeKind::BoolType: return Carried::Bool;
    default:
      throw std::invalid_argument(op + ": argument '" + arg.name() + "' is " + arg.type()->str() +
                                  "; the stable kernel path carries Tensor, int, float and bool arguments");
  }
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
  StableKernel(const OpDef& def, const c10::FunctionSchema& schema, BackplaneStableKernel fn)
      : contract_(def.qualified_name()), writes_(def.writes()), fn_(fn) {
    for (const auto& arg : schema.arguments()) kinds_.push_back(carried(arg, def.qualified_name()));
    outputs_ = writes_ ? 0 : schema.returns().size();
  }

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t n = kinds_.size();
    auto args = torch::jit::last(*stack, n);
    std::vector<at::Tensor> outs;
    bool nothing_to_do = false;
    if (writes_) {
      nothing_to_do = has_no_elements(contract_.check(args));
    } else {
      outs = outputs_ == 1 ? std::vector<at::Tensor>{contract_.new_output(args)} : contract_.new_outputs(args);
      nothing_to_do = std::all_of(outs.begin(), outs.end(), [](const at::Tensor& t) { return t.numel() == 0; });
    }
    if (!nothing_to_do) call(args, outs);
    torch::jit::drop(*stack, n);
    for (auto& out : outs) stack->emplace_back(std::move(out));
  }

 private:
  void call(c10::ArrayRef<c10::IValue> args, std::vector<at::Tensor>& outs) const {
    std::optional<c10::Device> device;
    for (const auto& a : args)
      if (a.isTensor() && a.toTensor().defined()) {
        device = a.toTensor().device();
        break;
      }
    const auto guard = device_guard(device);
    BackplaneStableCall ctx{sizeof(BackplaneStableCall), 0, -1, nullptr};
    if (device) {
      ctx.device_type = static_cast<int32_t>(device->type());
      ctx.device_index = device->has_index() ? device->index() : -1;
      if (!device->is_cpu()) ctx.stream = native_stream(*device);
    }
    // Borrowed handles: an AtenTensorHandle is an at::Tensor*, alive for the call.
    std::vector<uint64_t> values;
    values.reserve(outs.size() + args.size());
    for (auto& out : outs) values.push_back(reinterpret_cast<uint64_t>(&out));
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::IValue& a = args[i];
      switch (kinds_[i]) {
        case Carried::Tensor: values.push_back(reinterpret_cast<uint64_t>(&a.toTensor())); break;
        case Carried::Int: values.push_back(static_cast<uint64_t>(a.toInt())); break;
        case Carried::Bool: values.push_back(a.toBool() ? 1 : 0); break;
        case Carried::Float: {
          const double d = a.toDouble();
          uint64_t bits;
          std::memcpy(&bits, &d, sizeof bits);
          values.push_back(bits);
          break;
        }
      }
    }
    if (const char* error = fn_(&ctx, values.data(), outs.size(), args.size()))
      TORCH_CHECK(false, contract_.qualified_name(), ": ", error);
  }

  OpContract contract_;
  bool writes_;
  size_t outputs_ = 1;
  std::vector<Carried> kinds_;
  BackplaneStableKernel fn_;
};

int32_t offer(const char* op, const char* dispatch_key, BackplaneStableKernel fn, uint64_t target) {
  try {
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
    // One library object per offer, kept for the process: the registration lives as long.
    static std::mutex mutex;
    static auto* libraries = new std::list<torch::Library>();
    std::lock_guard<std::mutex> lock(mutex);
    torch::Library& m = libraries->emplace_back(torch::Library::IMPL, def->ns, key, __FILE__, __LINE__);
    offer_kernel(m, def->qualified_name().c_str(), key,
                 c10::KernelFunction::makeFromBoxedFunctor(std::make_unique<StableKernel>(*def, handle->schema(), fn)),
                 torch::CppFunction::makeFromBoxedFunctor(std::make_unique<StableKernel>(*def, handle->schema(), fn)));
    return 0;
  } catch (const c10::Error& e) {
    last_error_message = e.what_without_backtrace();
    return 1;
  } catch (const std::exception& e) {
    last_error_message = e.what();
    return 1;
  }
}

const char* last_error() { return last_error_message.c_str(); }

const BackplaneStableApi kApi = {sizeof(BackplaneStableApi), BACKPLANE_STABLE_API_VERSION, 0, &offer, &last_error};

}  // namespace

const BackplaneStableApi* stable_api() { return &kApi; }

std::optional<std::string> init_stable_plugin(void* handle) {
  auto init = reinterpret_cast<BackplaneStablePluginInit>(dlsym(handle, BACKPLANE_STABLE_PLUGIN_INIT));
  if (init == nullptr)
    return std::string("its manifest says torch_abi: stable, and it exports no ") + BACKPLANE_STABLE_PLUGIN_INIT +
           " (build its kernels with BACKPLANE_STABLE_KERNEL, backplane/stable_kernel.h)";
  if (const char* error = init(stable_api())) return std::string("its stable kernels were refused: ") + error;
  return std::nullopt;
}

}  // namespace backplane::detail
