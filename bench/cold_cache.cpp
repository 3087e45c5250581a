#include "cold_cache.h"

#include "cuda_module.h"

#include <ATen/ATen.h>

#include <array>
#include <stdexcept>
#include <string>

namespace backplane::bench {
namespace {

using CudaL2BytesFn = int64_t (*)(int device, char* error, std::size_t error_size);
constexpr const char* kCudaL2BytesSymbol = "backplane_bench_cuda_l2_bytes";

}  // namespace

int64_t cuda_l2_bytes(c10::Device device) {
  if (!device.is_cuda()) throw std::runtime_error("an L2 size is asked of CUDA devices only, found " + device.str());
  static const auto entry = reinterpret_cast<CudaL2BytesFn>(cuda_module_symbol(kCudaL2BytesSymbol));
  std::array<char, kCudaModuleErrorSize> error{};
  const int64_t bytes = entry(device.has_index() ? device.index() : 0, error.data(), error.size());
  if (bytes <= 0) throw std::runtime_error("cannot read the L2 size of " + device.str() + ": " + error.data());
  return bytes;
}

std::function<void()> l2_flush(c10::Device device) {
  // Twice the cache: a write of exactly its size may leave lines of the inputs where the
  // cache's replacement does not follow the order of the writes.
  at::Tensor buffer = at::empty({2 * cuda_l2_bytes(device)}, at::TensorOptions().dtype(at::kByte).device(device));
  return [buffer]() mutable { buffer.zero_(); };
}

}  // namespace backplane::bench
