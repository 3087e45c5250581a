#include "recorded_batch.h"

#include <dlfcn.h>

#include <array>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace backplane::bench {
namespace {

namespace fs = std::filesystem;

// Beside the engine's build or install: <prefix>/bin/backplane_bench, <prefix>/lib/<module>.
fs::path module_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path bin = ec ? fs::path(".") : exe.parent_path();
  return bin.parent_path() / "lib" / "backplane_bench_cuda_graph.so";
}

RecordCudaGraphFn load_entry_point() {
  // Loaded once and kept for the life of the process (recorded graphs point into it).
  static const RecordCudaGraphFn entry = [] {
    const fs::path path = module_path();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      throw std::runtime_error("cannot load " + path.string() + " (built with the CUDA plugin: BACKPLANE_CUDA, "
                               "nvcc and a CUDA build of torch): " + (why ? why : "unknown reason"));
    }
    auto* fn = reinterpret_cast<RecordCudaGraphFn>(dlsym(handle, kRecordCudaGraphSymbol));
    if (fn == nullptr)
      throw std::runtime_error(path.string() + " has no " + kRecordCudaGraphSymbol +
                               ": it does not come from this build of backplane_bench");
    return fn;
  }();
  return entry;
}

}  // namespace

void require_cuda_graph_module() { load_entry_point(); }

std::unique_ptr<RecordedBatch> record_cuda_graph(c10::Device device, const std::function<void()>& step,
                                                 int64_t calls) {
  if (!device.is_cuda())
    throw std::runtime_error("a CUDA graph records CUDA work only, found device " + device.str());
  std::array<char, 2048> error{};
  RecordedBatch* batch = load_entry_point()(device.index(), &step, calls, error.data(), error.size());
  if (batch == nullptr) throw std::runtime_error(std::string("cannot record as a CUDA graph: ") + error.data());
  return std::unique_ptr<RecordedBatch>(batch);
}

}  // namespace backplane::bench
