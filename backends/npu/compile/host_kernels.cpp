// The launch of Inductor's host kernels: launch_host_kernel (host_kernels.h) for C++ (the
// AOTInductor runner), and backplane_npu_launch_host_kernel for the Python wrapper code
// (_host_kernels.py, through ctypes). The launch is the device runtime's, not an op: it
// takes a function address and has no reference, dtypes or shape rule, so it has no
// schema (schemas live in the registry alone) and does not go through the dispatcher.
#include "compile/host_kernels.h"

#include "device/c_api.h"
#include "device/launch.h"

#include <c10/core/TensorImpl.h>
#include <c10/core/UndefinedTensorImpl.h>
#include <c10/util/Exception.h>

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

// The Python wrapper's launch (_host_kernels.launch): tensors[k] is the k-th tensor's
// TensorImpl (torch.Tensor._cdata), held by the caller for the call; the launch takes
// its own references. 0, or 1 with the refusal's message (as launch_host_kernel words it).
BACKPLANE_NPU_C_API int backplane_npu_launch_host_kernel(int64_t entry, c10::TensorImpl* const* tensors,
                                                        int64_t n_tensors, const int64_t* ints, int64_t n_ints,
                                                        const double* floats, int64_t n_floats, const char* name,
                                                        char* message, size_t size) {
  return backplane::npu::guarded(message, size, [&] {
    TORCH_CHECK(entry != 0, "backplane npu: host kernel ", name, ": null entry point");
    std::vector<at::Tensor> args;
    args.reserve(n_tensors);
    for (int64_t k = 0; k < n_tensors; ++k)
      args.emplace_back(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::unsafe_reclaim_from_nonowning(
          tensors[k]));
    backplane::npu::launch_host_kernel(reinterpret_cast<backplane::npu::HostKernelEntry>(entry), name, std::move(args),
                                       std::vector<int64_t>(ints, ints + n_ints),
                                       std::vector<double>(floats, floats + n_floats));
  });
}
