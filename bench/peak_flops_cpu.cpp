// The CPU's peak FMA rate (peak_flops.h): independent chains x = x * a + b in vector
// registers, enough of them (kChains) that each FMA's latency hides behind the others on
// the two FMA ports of a core, on every ATen thread at once. The widest instructions the
// processor has are chosen at run time (the function's target attribute compiles each for
// its instruction set whatever the build's flags); elsewhere (not x86, or x86 without
// AVX2+FMA) portable code that the compiler may or may not vectorize: a lower bound.
// Compiled with -O3 whatever the build type (CMakeLists.txt): a debug build's loop would
// keep the chains in memory and measure the stores.
#include "peak_flops.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace backplane::bench {
namespace {

constexpr int kChains = 12;        // 2 ports x 4-6 cycles of latency, and registers to spare
constexpr int kRuns = 3;
constexpr double kTargetSeconds = 0.02;

#define BACKPLANE_CHAINS(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11)

// Each returns the chains' sum, so the compiler keeps them; lanes: elements per vector.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) double avx512_float(int64_t iterations) {
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
#define DECLARE(k) __m512 x##k = _mm512_set1_ps(0.01f * (k + 1));
#define STEP(k) x##k = _mm512_fmadd_ps(x##k, a, b);
#define ADD(k) sum = _mm512_add_ps(sum, x##k);
  BACKPLANE_CHAINS(DECLARE)
  for (int64_t i = 0; i < iterations; ++i) {
    BACKPLANE_CHAINS(STEP)
  }
  __m512 sum = _mm512_setzero_ps();
  BACKPLANE_CHAINS(ADD)
  return _mm512_reduce_add_ps(sum);
#undef DECLARE
#undef STEP
#undef ADD
}

__attribute__((target("avx512f"))) double avx512_double(int64_t iterations) {
  const __m512d a = _mm512_set1_pd(0.999), b = _mm512_set1_pd(1e-3);
#define DECLARE(k) __m512d x##k = _mm512_set1_pd(0.01 * (k + 1));
#define STEP(k) x##k = _mm512_fmadd_pd(x##k, a, b);
#define ADD(k) sum = _mm512_add_pd(sum, x##k);
  BACKPLANE_CHAINS(DECLARE)
  for (int64_t i = 0; i < iterations; ++i) {
    BACKPLANE_CHAINS(STEP)
  }
  __m512d sum = _mm512_setzero_pd();
  BACKPLANE_CHAINS(ADD)
  return _mm512_reduce_add_pd(sum);
#undef DECLARE
#undef STEP
#undef ADD
}

__attribute__((target("avx2,fma"))) double avx2_float(int64_t iterations) {
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
#define DECLARE(k) __m256 x##k = _mm256_set1_ps(0.01f * (k + 1));
#define STEP(k) x##k = _mm256_fmadd_ps(x##k, a, b);
#define ADD(k) sum = _mm256_add_ps(sum, x##k);
  BACKPLANE_CHAINS(DECLARE)
  for (int64_t i = 0; i < iterations; ++i) {
    BACKPLANE_CHAINS(STEP)
  }
  __m256 sum = _mm256_setzero_ps();
  BACKPLANE_CHAINS(ADD)
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  double total = 0;
  for (float v : lanes) total += v;
  return total;
#undef DECLARE
#undef STEP
#undef ADD
}

__attribute__((target("avx2,fma"))) double avx2_double(int64_t iterations) {
  const __m256d a = _mm256_set1_pd(0.999), b = _mm256_set1_pd(1e-3);
#define DECLARE(k) __m256d x##k = _mm256_set1_pd(0.01 * (k + 1));
#define STEP(k) x##k = _mm256_fmadd_pd(x##k, a, b);
#define ADD(k) sum = _mm256_add_pd(sum, x##k);
  BACKPLANE_CHAINS(DECLARE)
  for (int64_t i = 0; i < iterations; ++i) {
    BACKPLANE_CHAINS(STEP)
  }
  __m256d sum = _mm256_setzero_pd();
  BACKPLANE_CHAINS(ADD)
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, sum);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
#undef DECLARE
#undef STEP
#undef ADD
}
#endif

template <typename T>
double portable(int64_t iterations) {
  T x[kChains];
  for (int k = 0; k < kChains; ++k) x[k] = T(0.01) * T(k + 1);
  const T a = T(0.999), b = T(1e-3);
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) x[k] = x[k] * a + b;
  double sum = 0;
  for (int k = 0; k < kChains; ++k) sum += x[k];
  return sum;
}

struct Loop {
  double (*run)(int64_t iterations);
  int lanes;         // elements per vector
  const char* name;  // for the run's context
};

Loop widest_loop(bool is_double) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return is_double ? Loop{avx512_double, 8, "avx512"} : Loop{avx512_float, 16, "avx512"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return is_double ? Loop{avx2_double, 4, "avx2+fma"} : Loop{avx2_float, 8, "avx2+fma"};
#endif
  return is_double ? Loop{portable<double>, 1, "portable (a lower bound)"}
                   : Loop{portable<float>, 1, "portable (a lower bound)"};
}

// Seconds for `iterations` of the loop on each of `threads` threads at once.
double seconds_of(const Loop& loop, int64_t iterations, int threads, std::vector<double>& sink) {
  const auto start = std::chrono::steady_clock::now();
  at::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) sink[t] = loop.run(iterations);
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

PeakRate cpu_peak_flops(c10::ScalarType dtype, int threads) {
  threads = std::max(threads, 1);
  const Loop loop = widest_loop(dtype == c10::kDouble);
  std::vector<double> sink(threads);
  int64_t iterations = 1 << 14;
  const double first = seconds_of(loop, iterations, threads, sink);  // warm-up, and the size of a run
  if (first > 0) iterations = std::clamp<int64_t>(static_cast<int64_t>(iterations * kTargetSeconds / first), 1 << 14, 1LL << 32);
  double best = 0;
  for (int run = 0; run < kRuns; ++run) {
    const double s = seconds_of(loop, iterations, threads, sink);
    const double flops = 2.0 * kChains * loop.lanes * static_cast<double>(iterations) * threads;
    if (s > 0) best = std::max(best, flops / s);
  }
  volatile double keep = sink[0];  // the chains' results are used
  (void)keep;
  return {best, std::string(loop.name) + " FMA chains on " + std::to_string(threads) + " thread(s)"};
}

}  // namespace backplane::bench
