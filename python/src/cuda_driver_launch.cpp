// The CUDA driver calls of a replay (cuda_driver_launch.h).
#include "cuda_driver_launch.h"

#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <dlfcn.h>

#include <mutex>

namespace backplane::python_kernels {
namespace {

// The few driver entry points used, declared with plain types (no cuda.h: CUresult is an
// int, CUfunction, CUstream and CUcontext are pointers, CUdevice an int).
struct Driver {
  int (*launch_kernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                       void**) = nullptr;
  int (*ctx_get_current)(void**) = nullptr;
  int (*ctx_set_current)(void*) = nullptr;
  int (*device_get)(int*, int) = nullptr;
  int (*primary_ctx_retain)(void**, int) = nullptr;
  int (*get_error_string)(int, const char**) = nullptr;
  std::string unavailable;  // why the driver could not be reached
};

const Driver& driver() {
  static const Driver d = [] {
    Driver d;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // never closed: see PITFALLS (dlclose)
    if (lib == nullptr) {
      const char* why = dlerror();
      d.unavailable = std::string("dlopen(\"libcuda.so.1\") failed: ") + (why ? why : "no reason given");
      return d;
    }
    auto find = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr && d.unavailable.empty()) d.unavailable = std::string("libcuda.so.1 has no ") + name;
    };
    find(d.launch_kernel, "cuLaunchKernel");
    find(d.ctx_get_current, "cuCtxGetCurrent");
    find(d.ctx_set_current, "cuCtxSetCurrent");
    find(d.device_get, "cuDeviceGet");
    find(d.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    find(d.get_error_string, "cuGetErrorString");
    return d;
  }();
  return d;
}

std::string error_of(const Driver& d, int code, const char* call) {
  const char* text = nullptr;
  if (d.get_error_string == nullptr || d.get_error_string(code, &text) != 0 || text == nullptr) text = "unknown error";
  return std::string(call) + " failed with CUDA error " + std::to_string(code) + " (" + text + ")";
}

}  // namespace

std::string cuda_launch(const KernelLaunch& launch, void** params, const uint64_t*, void* stream,
                        c10::DeviceIndex device) {
  const Driver& d = driver();
  if (!d.unavailable.empty()) return "the CUDA driver cannot be reached: " + d.unavailable;
  void* context = nullptr;
  if (int rc = d.ctx_get_current(&context); rc != 0) return error_of(d, rc, "cuCtxGetCurrent");
  if (context == nullptr) {
    int dev = 0;
    if (int rc = d.device_get(&dev, device); rc != 0) return error_of(d, rc, "cuDeviceGet");
    if (int rc = d.primary_ctx_retain(&context, dev); rc != 0) return error_of(d, rc, "cuDevicePrimaryCtxRetain");
    if (int rc = d.ctx_set_current(context); rc != 0) return error_of(d, rc, "cuCtxSetCurrent");
  }
  if (static_cast<uint64_t>(launch.grid[0]) * launch.grid[1] * launch.grid[2] == 0) return "";  // as Triton: nothing
  const int rc = d.launch_kernel(reinterpret_cast<void*>(launch.function), launch.grid[0], launch.grid[1],
                                 launch.grid[2], launch.threads, 1, 1, launch.shared, stream, params, nullptr);
  return rc == 0 ? "" : error_of(d, rc, "cuLaunchKernel");
}

void* current_cuda_stream(c10::DeviceIndex device) {
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  return impl->getStream(c10::Device(c10::DeviceType::CUDA, device)).native_handle();
}

}  // namespace backplane::python_kernels
