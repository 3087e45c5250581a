#include "host_kernels.h"

#include "launch.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>

namespace backplane::npu {
namespace {

// The npu device a kernel's tensors are on, or none when they are all on the CPU (a CPU
// kernel of a graph whose wrapper is the device's). 0-dim CPU tensors go with either:
// they are scalars Inductor passes by address.
std::optional<c10::Device> device_of(const std::string& name, const std::vector<at::Tensor>& tensors) {
  std::optional<c10::Device> device;
  std::optional<c10::Device> host;
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.defined(), "backplane npu: host kernel ", name, " got an undefined tensor");
    if (t.is_cpu()) {
      if (t.dim() > 0) host = t.device();
      continue;
    }
    TORCH_CHECK(is_npu(t), "backplane npu: host kernel ", name, " got a tensor on ", t.device(),
                "; expected its tensors on one npu device, or all on the CPU");
    if (!device) device = t.device();
    TORCH_CHECK(t.device() == *device, "backplane npu: host kernel ", name, " got tensors on ", *device, " and ",
                t.device(), "; expected them all on one npu device");
  }
  TORCH_CHECK(!(device && host), "backplane npu: host kernel ", name, " got tensors on ", *device,
              " and on the CPU; expected them on one npu device (0-dim CPU scalars excepted), or all on the CPU");
  return device;
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
  const std::optional<c10::Device> device = device_of(name, tensors);
  std::vector<void*> pointers;
  pointers.reserve(tensors.size());
  if (!device) {  // all on the CPU: host memory, in program order on this thread
    for (at::Tensor& t : tensors) pointers.push_back(t.data_ptr());
    entry(pointers.data(), ints.data(), floats.data());
    return;
  }
  // The addresses are taken now, not when the kernel runs: a tensor given a new layout or
  // storage after the launch (o.t_(), p.data = q) must not redirect it. data_ptr()
  // includes the storage offset; an empty tensor may have none (nullptr). A 0-dim CPU
  // scalar is copied, so a later host write to it (an optimizer's step count) is not seen.
  // The storages are held, not only the tensors: a tensor's storage can be replaced
  // (and freed) while the kernel waits.
  std::vector<c10::Storage> storages;
  storages.reserve(tensors.size());
  for (at::Tensor& t : tensors) {
    if (t.is_cpu()) t = t.clone();
    pointers.push_back(t.is_cpu() ? t.data_ptr() : npuDevicePtrToHost(t.data_ptr()));
    storages.push_back(t.storage());
  }
  launch(device->index(), name,
         [entry, storages = std::move(storages), pointers = std::move(pointers), ints = std::move(ints),
          floats = std::move(floats)] { entry(pointers.data(), ints.data(), floats.data()); });
}

}  // namespace backplane::npu

// Not a Backplane op: the device runtime's entry for generated code, in a namespace of
// the device's own.
TORCH_LIBRARY(npu_host, m) {
  m.def("launch(int entry, Tensor[] tensors, int[] ints, float[] floats, str name) -> ()",
        TORCH_FN(backplane::npu::launch_op));
}
