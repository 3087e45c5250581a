#include "host_kernels.h"

#include "launch.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>

namespace backplane::npu {
namespace {

c10::DeviceIndex device_of(const std::string& name, const std::vector<at::Tensor>& tensors) {
  std::optional<c10::Device> device;
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.defined() && is_npu(t), "backplane npu: host kernel ", name, " got ",
                t.defined() ? t.device().str() : std::string("an undefined tensor"),
                "; expected every tensor argument on one npu device");
    if (!device) device = t.device();
    TORCH_CHECK(t.device() == *device, "backplane npu: host kernel ", name, " got tensors on ", *device, " and ",
                t.device(), "; expected them all on one npu device");
  }
  return device ? device->index() : current_device();
}

// The dispatcher's face of launch_host_kernel, for the Python wrapper code Inductor
// generates (a call through torch.ops costs a few microseconds; the kernels it saves
// cost a stream round trip each).
void launch_op(int64_t entry, std::vector<at::Tensor> tensors, std::vector<int64_t> ints, std::vector<double> floats,
               c10::string_view name) {
  TORCH_CHECK(entry != 0, "backplane npu: host kernel ", name, ": null entry point");
  launch_host_kernel(reinterpret_cast<HostKernelEntry>(entry), std::string(name), std::move(tensors), std::move(ints),
                     std::move(floats));
}

}  // namespace

void launch_host_kernel(HostKernelEntry entry, const std::string& name, std::vector<at::Tensor> tensors,
                        std::vector<int64_t> ints, std::vector<double> floats) {
  const c10::DeviceIndex index = device_of(name, tensors);
  launch(index, name, [entry, tensors = std::move(tensors), ints = std::move(ints), floats = std::move(floats)] {
    std::vector<void*> pointers;
    pointers.reserve(tensors.size());
    // data_ptr() includes the storage offset; an empty tensor may have none (nullptr).
    for (const at::Tensor& t : tensors) pointers.push_back(npuDevicePtrToHost(t.data_ptr()));
    entry(pointers.data(), ints.data(), floats.data());
  });
}

}  // namespace backplane::npu

// Not a Backplane op: the device runtime's entry for generated code, in a namespace of
// the device's own.
TORCH_LIBRARY(npu_host, m) {
  m.def("launch(int entry, Tensor[] tensors, int[] ints, float[] floats, str name) -> ()",
        TORCH_FN(backplane::npu::launch_op));
}
