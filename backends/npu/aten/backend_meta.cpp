// Backend metadata on npu tensors: what torch._utils.set_tensor_metadata stores and
// get_tensor_metadata reads, what torch.save writes beside a tensor and torch.load puts
// back, and what FakeTensor copies onto its fakes (torch._C._copy_backend_meta too). A
// device keeps there what describes its own layout of a tensor's memory (a vendor's
// internal format, say); this emulated device has none, so it keeps the flags as given.
// Limits: PyTorch's interface is a map of names to booleans; a tensor made by an op
// (even a copy or .to) starts with none, as on PyTorch's reference device.
#include <ATen/core/Tensor.h>
#if __has_include(<torch/csrc/jit/serialization/pickler_helper.h>)
#include <torch/csrc/jit/serialization/pickler_helper.h>  // torch 2.8 and later
#else
#include <torch/csrc/jit/serialization/pickler.h>
#endif

#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <unordered_map>

namespace backplane::npu {
namespace {

struct NpuBackendMeta final : c10::BackendMeta {
  explicit NpuBackendMeta(std::map<std::string, bool> flags) : flags(std::move(flags)) {}
  const std::map<std::string, bool> flags;  // never changed: clone shares it
};

void get_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& out) {
  const auto* meta = dynamic_cast<const NpuBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  if (meta != nullptr) out.insert(meta->flags.begin(), meta->flags.end());
}

// Replaces what the tensor had; an empty map leaves it with none.
void set_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& in) {
  c10::intrusive_ptr<c10::BackendMeta> meta;
  if (!in.empty()) meta = c10::make_intrusive<NpuBackendMeta>(std::map<std::string, bool>(in.begin(), in.end()));
  t.unsafeGetTensorImpl()->set_backend_meta(meta);
}

// Runs while the plugin is opened: a failure (another PrivateUse1 backend registered
// first) is reported, not thrown from a static initializer, which would end the process.
const bool registered = [] {
  try {
    torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &get_metadata, &set_metadata);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "backplane npu: cannot register npu tensor metadata: %s\n", e.what());
  }
  return true;
}();

}  // namespace
}  // namespace backplane::npu
