// The bench's two rules, the stop rule (adaptive_stop.h) and the noise verdict
// (noisy_copy.h), behind a C ABI for the Python side (python/backplane/bench/native.py,
// through ctypes), so that they are written once: Python's torch.compile rows sample
// until this stop rule says enough, and runs read back with --input get this verdict.
// Built as lib/backplane_bench_c_api.so beside the engine; it links nothing but the C++
// runtime (no torch, no Google Benchmark).
#include "adaptive_stop.h"
#include "console_table.h"
#include "noisy_copy.h"

#include <cstdint>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

// `text` into out (NUL-terminated, cut at out_size); the size the whole text needs, NUL
// included, so a caller whose buffer was too small calls again with that size.
uint64_t copy_text(const std::string& text, char* out, uint64_t out_size) {
  if (out && out_size) {
    const size_t copied = std::min<size_t>(text.size(), out_size - 1);
    std::memcpy(out, text.data(), copied);
    out[copied] = '\0';
  }
  return text.size() + 1;
}

}  // namespace

extern "C" {

// Layout mirrored by native.py's ctypes structure; fields only ever appended.
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

// The verdict's lines for n copy_ timings, joined by '\n', as copy_text gives them.
__attribute__((visibility("default"))) uint64_t backplane_bench_noisy_copy_groups(
    const char* const* backends, const char* const* dtypes, const int64_t* bytes, const double* us, uint64_t n,
    double threshold, char* out, uint64_t out_size) {
  std::vector<backplane::bench::CopyTiming> timings;
  timings.reserve(n);
  for (uint64_t i = 0; i < n; ++i) timings.push_back({backends[i], dtypes[i], bytes[i], us[i]});
  std::string text;
  for (const auto& line : backplane::bench::noisy_copy_groups(timings, threshold))
    text += (text.empty() ? "" : "\n") + line;
  return copy_text(text, out, out_size);
}

// The console table of a run the engine did not print: made with the backends whose rows
// are shared (`shared_backends[i]` reads its reference and copy_ rows from
// `shared_owners[i]`), fed one repetition at a time as the JSON holds them (NaN: the
// counter is absent; error: "" for a timed repetition), then formatted (as copy_text
// gives it). An opaque handle, freed by backplane_bench_table_free.
__attribute__((visibility("default"))) void* backplane_bench_table_new(const char* const* shared_backends,
                                                                      const char* const* shared_owners,
                                                                      uint64_t n_shared, int backward) {
  std::map<std::string, std::string> shared;
  for (uint64_t i = 0; i < n_shared; ++i) shared[shared_backends[i]] = shared_owners[i];
  return new backplane::bench::ConsoleTable(std::move(shared), backward != 0);
}

// flops: per call (NaN: not known); mode: eager, graph, compile or compile+graph.
__attribute__((visibility("default"))) void backplane_bench_table_add_run(void* table, const char* run_name,
                                                                         double seconds, double bytes_per_second,
                                                                         double spread, const char* error,
                                                                         double flops, const char* mode) {
  const auto present = [](double v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); };
  static_cast<backplane::bench::ConsoleTable*>(table)->add_run(run_name, seconds, present(bytes_per_second),
                                                               present(spread), error ? error : "", present(flops),
                                                               mode && *mode ? mode : "eager");
}

// The run's measured peak FLOP/s for rows of `backend` in `dtype` (context "peak_flops.<backend>.<dtype>").
__attribute__((visibility("default"))) void backplane_bench_table_set_peak_flops(void* table, const char* backend,
                                                                                const char* dtype,
                                                                                double flops_per_second) {
  static_cast<backplane::bench::ConsoleTable*>(table)->set_peak_flops(backend, dtype, flops_per_second);
}

__attribute__((visibility("default"))) uint64_t backplane_bench_table_format(const void* table, char* out,
                                                                            uint64_t out_size) {
  return copy_text(static_cast<const backplane::bench::ConsoleTable*>(table)->format(), out, out_size);
}

__attribute__((visibility("default"))) void backplane_bench_table_free(void* table) {
  delete static_cast<backplane::bench::ConsoleTable*>(table);
}

}  // extern "C"
