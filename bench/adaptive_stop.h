// When a row has been timed enough, as nvbench decides it: samples (batches of calls) are
// taken until their relative spread is below a target, never before a minimum time and
// never after a maximum. A quiet row stops at the minimum; a noisy one (a busy machine,
// a 2-core CPU) stops at the maximum with the spread it reached, which the table shows.
//   spread: half the interquartile range of the per-call times over their median: robust
//   to the odd sample a scheduler tick lengthens, which the standard deviation is not.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace backplane::bench {

struct StopRule {
  double min_seconds = 0.05;     // least time sampled per row (per repetition)
  double max_seconds = 0.5;      // most time sampled per row, whatever the spread
  double target_spread = 0.02;   // stop once the spread is below this (2%)
  size_t min_samples = 5;        // fewer cannot estimate a spread
};

inline double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (at - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

inline double median_of(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return quantile_of_sorted(samples, 0.5);
}

// Half the interquartile range over the median; 0 for fewer than two samples.
inline double relative_spread(std::vector<double> samples) {
  if (samples.size() < 2) return 0;
  std::sort(samples.begin(), samples.end());
  const double mid = quantile_of_sorted(samples, 0.5);
  if (mid <= 0) return 0;
  return (quantile_of_sorted(samples, 0.75) - quantile_of_sorted(samples, 0.25)) / (2 * mid);
}

// Whether sampling stops after `elapsed` seconds of samples: at the maximum always (one
// sample at least), before the minimum never, in between once the spread is on target.
inline bool should_stop(const std::vector<double>& samples, double elapsed, const StopRule& rule) {
  if (samples.empty()) return false;
  if (elapsed >= rule.max_seconds) return true;
  if (elapsed < rule.min_seconds || samples.size() < rule.min_samples) return false;
  return relative_spread(samples) <= rule.target_spread;
}

}  // namespace backplane::bench
