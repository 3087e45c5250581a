// Whether a run was noisy: its copy_ rows of the same bytes on the same device (several ops
// copy a 1M-element float32 tensor) time the same thing, so where they disagree by more
// than a threshold the machine was busy and every figure of the run is suspect (a run
// that read "1867% of copy_" had such rows). The same decision as
// python/backplane/bench/noise.py, which says it for runs read back with --input.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace backplane::bench {

inline constexpr double kNoisyCopyThreshold = 0.3;  // the slowest copy_ 30% above the fastest

struct CopyTiming {
  std::string backend;  // the backend whose rows hold the device's copy_ rows
  std::string dtype;
  int64_t bytes = 0;    // bytes copied per call
  double us = 0;        // one repetition's time per call
};

// One line per group of copy_ timings that disagree beyond `threshold`, else none.
inline std::vector<std::string> noisy_copy_groups(const std::vector<CopyTiming>& timings,
                                                  double threshold = kNoisyCopyThreshold) {
  std::map<std::tuple<std::string, std::string, int64_t>, std::vector<double>> groups;
  for (const auto& t : timings) groups[{t.backend, t.dtype, t.bytes}].push_back(t.us);
  std::vector<std::string> lines;
  for (const auto& [key, us] : groups) {
    if (us.size() < 2) continue;
    const auto [lo, hi] = std::minmax_element(us.begin(), us.end());
    if (*lo <= 0 || *hi / *lo <= 1 + threshold) continue;
    const auto& [backend, dtype, bytes] = key;
    char line[256];
    std::snprintf(line, sizeof(line), "%s %s copy_ of %lld bytes: %zu timings from %.2f to %.2f us (%.0f%% apart, "
                  "threshold %.0f%%)", backend.c_str(), dtype.c_str(), static_cast<long long>(bytes), us.size(), *lo,
                  *hi, 100 * (*hi / *lo - 1), 100 * threshold);
    lines.emplace_back(line);
  }
  return lines;
}

}  // namespace backplane::bench
