// Part of backplane_bench_cuda_graph.so (cuda_module.h): what the engine asks of a CUDA
// device besides graphs. Its L2 cache size (--cold-l2 flushes twice that; cold_cache.h) and
// its peak rate of fused multiply-adds (the %peak column; peak_flops.h).
//
// The peak is measured, not looked up: a kernel of independent FMA chains, enough threads
// to fill every SM (blocks of 256 threads, kBlocksPerSm per SM) and kChains chains per
// thread so each FMA's latency is hidden behind the others, timed with CUDA events; the best
// of kRuns runs after a warm-up, each sized to last about kTargetSeconds. Each FMA counts 2
// FLOPs. Limits: CUDA cores only (fmaf, fma), never tensor cores: the elementwise and
// reduction kernels a bench row times run on CUDA cores, so that is the rate they can
// reach. float32 and float64 only; the engine times 16-bit rows against float32's rate,
// the opmath dtype the kernels compute them in. The clock the GPU runs at (boost, power
// limits) is the one the bench rows run at, measured in the same process.
// Plain CUDA runtime, no torch headers: it compiles in seconds.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;
constexpr int kChains = 8;
constexpr int kRuns = 3;
constexpr double kTargetSeconds = 0.01;

template <typename T>
__global__ void fma_chains(T* out, T a, T b, int iterations) {
  T x[kChains];
#pragma unroll
  for (int k = 0; k < kChains; ++k) x[k] = T(threadIdx.x + k) * T(1e-3);
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int k = 0; k < kChains; ++k) x[k] = fma(x[k], a, b);
  }
  T sum = 0;
#pragma unroll
  for (int k = 0; k < kChains; ++k) sum += x[k];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;  // keeps the chains: their result is stored
}

void describe(const std::string& message, char* error, std::size_t error_size) {
  std::snprintf(error, error_size, "%s", message.c_str());
}

bool check(cudaError_t status, const char* what, char* error, std::size_t error_size) {
  if (status == cudaSuccess) return true;
  describe(std::string(what) + ": " + cudaGetErrorString(status), error, error_size);
  (void)cudaGetLastError();
  return false;
}

// Restores the calling thread's current device on exit (the engine's rows set their own).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaGetDevice(&previous_);
    ok_ = cudaSetDevice(device);
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  cudaError_t status() const { return ok_; }

 private:
  int previous_ = 0;
  cudaError_t ok_ = cudaSuccess;
};

template <typename T>
double peak_flops(int device, char* error, std::size_t error_size) {
  const DeviceScope scope(device);
  if (!check(scope.status(), "cudaSetDevice", error, error_size)) return 0;
  int sms = 0;
  if (!check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "multiprocessor count", error,
             error_size))
    return 0;
  const int blocks = sms * kBlocksPerSm;
  T* out = nullptr;
  if (!check(cudaMalloc(&out, sizeof(T) * blocks * kThreads), "cudaMalloc", error, error_size)) return 0;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  // a slightly below 1 and b small: x converges to b / (1 - a), never overflowing or subnormal.
  const T a = T(0.999), b = T(1e-3);
  const auto seconds_of = [&](int iterations) {
    cudaEventRecord(start, nullptr);
    fma_chains<T><<<blocks, kThreads>>>(out, a, b, iterations);
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return ms * 1e-3;
  };
  int iterations = 1024;
  double best = 0;
  const double first = seconds_of(iterations);  // warm-up, and the size of a run
  if (first > 0) iterations = static_cast<int>(std::clamp(iterations * kTargetSeconds / first, 1024.0, 1e8));
  for (int run = 0; run < kRuns; ++run) {
    const double s = seconds_of(iterations);
    const double flops = 2.0 * kChains * double(iterations) * blocks * kThreads;
    if (s > 0) best = std::max(best, flops / s);
  }
  const bool ok = check(cudaGetLastError(), "the FMA kernel", error, error_size);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(out);
  if (ok && !(best > 0)) describe("the FMA kernel's events gave no time", error, error_size);
  return ok ? best : 0;
}

}  // namespace

// FLOP/s of fused multiply-adds on CUDA device `device` in float32 (bits 32) or float64
// (bits 64); 0 with the reason in `error` where it cannot be measured.
extern "C" __attribute__((visibility("default"))) double backplane_bench_cuda_peak_flops(int device, int bits,
                                                                                        char* error,
                                                                                        std::size_t error_size) {
  if (bits == 32) return peak_flops<float>(device, error, error_size);
  if (bits == 64) return peak_flops<double>(device, error, error_size);
  describe("peak FMA rate: expected 32 or 64 bits, found " + std::to_string(bits), error, error_size);
  return 0;
}

// The L2 cache of CUDA device `device` in bytes; 0 with the reason in `error`.
extern "C" __attribute__((visibility("default"))) int64_t backplane_bench_cuda_l2_bytes(int device, char* error,
                                                                                       std::size_t error_size) {
  int bytes = 0;
  if (!check(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device), "L2 cache size", error, error_size))
    return 0;
  if (bytes <= 0) describe("the device reports no L2 cache", error, error_size);
  return bytes;
}
