#include "peak_flops.h"

#include "cuda_module.h"

#include <ATen/Parallel.h>

#include <array>
#include <stdexcept>
#include <string>

namespace backplane::bench {
namespace {

using CudaPeakFlopsFn = double (*)(int device, int bits, char* error, std::size_t error_size);
constexpr const char* kCudaPeakFlopsSymbol = "backplane_bench_cuda_peak_flops";

}  // namespace

c10::ScalarType peak_dtype(c10::ScalarType dtype) { return dtype == c10::kDouble ? c10::kDouble : c10::kFloat; }

PeakRate measure_peak_flops(c10::Device device, c10::ScalarType dtype) {
  if (dtype != c10::kFloat && dtype != c10::kDouble)
    throw std::runtime_error(std::string("the peak FMA rate is measured in float32 or float64, found ") +
                             c10::toString(dtype));
  if (device.is_cpu()) return cpu_peak_flops(dtype, at::get_num_threads());
  if (device.is_cuda()) {
    static const auto entry = reinterpret_cast<CudaPeakFlopsFn>(cuda_module_symbol(kCudaPeakFlopsSymbol));
    std::array<char, kCudaModuleErrorSize> error{};
    const double rate =
        entry(device.has_index() ? device.index() : 0, dtype == c10::kDouble ? 64 : 32, error.data(), error.size());
    if (!(rate > 0)) throw std::runtime_error(error.data());
    return {rate, "a CUDA-core FMA kernel on every SM (cuda_peak_flops.cu)"};
  }
  throw std::runtime_error("no FMA loop for " + device.str() + " devices (cpu and cuda only)");
}

}  // namespace backplane::bench
