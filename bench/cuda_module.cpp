#include "cuda_module.h"

#include <dlfcn.h>

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace backplane::bench {
namespace {

namespace fs = std::filesystem;

void* module_handle() {
  static void* const handle = [] {
    const std::string path = cuda_module_path();
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* why = dlerror();
      throw std::runtime_error("cannot load " + path + " (built with the CUDA plugin: BACKPLANE_CUDA, nvcc and a "
                               "CUDA build of torch): " + (why ? why : "unknown reason"));
    }
    return h;
  }();
  return handle;
}

}  // namespace

std::string cuda_module_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path bin = ec ? fs::path(".") : exe.parent_path();
  return (bin.parent_path() / "lib" / "backplane_bench_cuda_graph.so").string();
}

void* cuda_module_symbol(const char* name) {
  void* handle = module_handle();
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr)
    throw std::runtime_error(cuda_module_path() + " has no " + name + ": it does not come from this build of "
                             "backplane_bench");
  return symbol;
}

}  // namespace backplane::bench
