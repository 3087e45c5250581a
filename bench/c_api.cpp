// The bench's two rules, the stop rule (adaptive_stop.h) and the noise verdict
// (noisy_copy.h), behind a C ABI for the Python side (python/backplane/bench/rules.py,
// through ctypes), so that they are written once: Python's torch.compile rows sample
// until this stop rule says enough, and runs read back with --input get this verdict.
// Built as lib/backplane_bench_rules.so beside the engine; it links nothing but the C++
// runtime (no torch, no Google Benchmark).
#include "adaptive_stop.h"
#include "noisy_copy.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

extern "C" {

// Layout mirrored by rules.py's ctypes structure; fields only ever appended.
struct BackplaneBenchStopRule {
  double min_seconds;
  double max_seconds;
  double target_spread;
  uint64_t min_samples;
};

__attribute__((visibility("default"))) BackplaneBenchStopRule backplane_bench_default_stop_rule() {
  const backplane::bench::StopRule rule;
  return {rule.min_seconds, rule.max_seconds, rule.target_spread, rule.min_samples};
}

__attribute__((visibility("default"))) double backplane_bench_relative_spread(const double* samples, uint64_t n) {
  return backplane::bench::relative_spread(std::vector<double>(samples, samples + n));
}

__attribute__((visibility("default"))) int backplane_bench_should_stop(const double* samples, uint64_t n,
                                                                       double elapsed,
                                                                       const BackplaneBenchStopRule* rule) {
  const backplane::bench::StopRule r{rule->min_seconds, rule->max_seconds, rule->target_spread,
                                     static_cast<size_t>(rule->min_samples)};
  return backplane::bench::should_stop(std::vector<double>(samples, samples + n), elapsed, r) ? 1 : 0;
}

__attribute__((visibility("default"))) double backplane_bench_noisy_copy_threshold() {
  return backplane::bench::kNoisyCopyThreshold;
}

// The verdict's lines for n copy_ timings, joined by '\n', into out (NUL-terminated, cut
// at out_size); returns the size the whole text needs, NUL included, so a caller whose
// buffer was too small calls again with that size.
__attribute__((visibility("default"))) uint64_t backplane_bench_noisy_copy_groups(
    const char* const* backends, const char* const* dtypes, const int64_t* bytes, const double* us, uint64_t n,
    double threshold, char* out, uint64_t out_size) {
  std::vector<backplane::bench::CopyTiming> timings;
  timings.reserve(n);
  for (uint64_t i = 0; i < n; ++i) timings.push_back({backends[i], dtypes[i], bytes[i], us[i]});
  std::string text;
  for (const auto& line : backplane::bench::noisy_copy_groups(timings, threshold))
    text += (text.empty() ? "" : "\n") + line;
  if (out && out_size) {
    const size_t copied = std::min<size_t>(text.size(), out_size - 1);
    std::memcpy(out, text.data(), copied);
    out[copied] = '\0';
  }
  return text.size() + 1;
}

}  // extern "C"
