#include "console_table.h"

#include "adaptive_stop.h"
#include "noisy_copy.h"
#include "util/strings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace backplane::bench {
namespace {

using backplane::detail::split;

std::string formatted(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
}

std::string duration(double us) {
  if (us >= 1e6) return formatted("%.2f s", us / 1e6);
  if (us >= 1e3) return formatted("%.2f ms", us / 1e3);
  return formatted(us < 10 ? "%.2f us" : "%.1f us", us);
}

// Half the range of the repetitions over their median; one repetition: its samples' spread.
double spread_of(const std::vector<double>& times, const std::vector<double>& sample_spreads) {
  if (times.size() > 1) {
    const auto [lo, hi] = std::minmax_element(times.begin(), times.end());
    return (*hi - *lo) / (2 * median_of(times));
  }
  return sample_spreads.empty() ? 0 : sample_spreads.front();
}

// Percent of the peak rate: elementwise ops sit far below it, so small values keep two
// significant digits (0.37%) where %copy_'s whole percent would read 0%.
std::string small_percent(double percent) {
  if (percent >= 10) return formatted("%.0f%%", percent);
  return formatted(percent >= 1 ? "%.1f%%" : "%.2g%%", percent);
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s;
}

std::string right(const std::string& s, size_t width) {
  return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
}

}  // namespace

ConsoleTable::ConsoleTable(std::map<std::string, std::string> shared_rows, bool backward)
    : backward_(backward), shared_rows_(std::move(shared_rows)) {}

bool ConsoleTable::add_run(const std::string& run_name, double seconds, std::optional<double> bytes_per_second,
                           std::optional<double> spread, const std::string& error, std::optional<double> flops,
                           const std::string& mode) {
  const auto parts = split(run_name, '/');
  if (parts.size() != 4) return false;
  if (parts[0].rfind("call_overhead_", 0) == 0) {
    if (error.empty()) call_ns_[{parts[0].substr(14), parts[1], parts[2]}].push_back(seconds * 1e9);
    return true;
  }
  Samples& s = rows_[{parts[0], parts[1], parts[3]}][parts[2]];
  s.mode = mode;
  if (!error.empty()) {
    s.error = error;
    return true;
  }
  s.times_us.push_back(seconds * 1e6);
  if (bytes_per_second) s.bytes_per_second.push_back(*bytes_per_second);
  if (spread) s.spreads.push_back(*spread);
  if (flops && *flops > 0) s.flops.push_back(*flops);
  return true;
}

void ConsoleTable::set_peak_flops(const std::string& backend, const std::string& dtype, double flops_per_second) {
  if (flops_per_second > 0 && std::isfinite(flops_per_second)) peak_flops_[{backend, dtype}] = flops_per_second;
}

std::optional<double> ConsoleTable::peak_of(const std::string& backend, const std::string& dtype) const {
  if (const auto it = peak_flops_.find({backend, dtype}); it != peak_flops_.end()) return it->second;
  const auto owner = shared_rows_.find(backend);  // measured once per device, under its first backend
  return owner == shared_rows_.end() || owner->second == backend ? std::nullopt : peak_of(owner->second, dtype);
}

const ConsoleTable::Samples* ConsoleTable::find(const std::string& op, const std::string& backend,
                                                const std::string& shape, const std::string& impl) const {
  auto row = rows_.find({op, backend, shape});
  if (row != rows_.end()) {
    auto it = row->second.find(impl);
    if (it != row->second.end()) return &it->second;
  }
  auto owner = shared_rows_.find(backend);  // the device's rows, timed under another backend
  return owner == shared_rows_.end() || owner->second == backend ? nullptr : find(op, owner->second, shape, impl);
}

std::string ConsoleTable::line(const std::string& op, const std::string& backend, const std::string& shape_dtype,
                               const Samples& mine, bool any_compiled) const {
  const auto cut = shape_dtype.rfind('_');
  const std::string shape = shape_dtype.substr(0, cut), dtype = shape_dtype.substr(cut + 1);
  std::ostringstream out;
  out << pad(op, 20) << pad(shape, 20) << pad(dtype, 9) << pad(backend, 9) << pad(mine.mode, 14);
  if (!mine.error.empty()) return out.str() + "FAILED: " + mine.error + "\n";
  const double t = median_of(mine.times_us);
  const double gbps = mine.bytes_per_second.empty() ? 0 : median_of(mine.bytes_per_second) / 1e9;
  out << right(duration(t), 10) << right(formatted("%.1f%%", 100 * spread_of(mine.times_us, mine.spreads)), 8)
      << right(gbps > 0 ? formatted("%.1f", gbps) : "-", 8);
  const Samples* copy = find(op, backend, shape_dtype, "copy_");
  out << right(gbps > 0 && copy && copy->error.empty() && !copy->bytes_per_second.empty()
                   ? formatted("%.0f%%", 100.0 * gbps * 1e9 / median_of(copy->bytes_per_second))
                   : "-",
               8);
  const std::optional<double> peak = peak_of(backend, dtype);
  out << right(!mine.flops.empty() && peak && t > 0
                   ? small_percent(100.0 * median_of(mine.flops) / (t * 1e-6) / *peak)
                   : "-",
               8);
  for (const char* impl : {"reference", "compiled"}) {
    if (!any_compiled && std::string(impl) == "compiled") break;
    const Samples* base = find(op, backend, shape_dtype, impl);
    out << right(base && base->error.empty() && !base->times_us.empty()
                     ? formatted("%.2f", median_of(base->times_us) / t)
                     : "-",
                 impl == std::string("reference") ? 8 : 10);
  }
  return out.str() + "\n";
}

std::string ConsoleTable::format() const {
  std::ostringstream out;
  bool any_compiled = false;
  for (const auto& row : rows_) {  // the column only where a compiled row was timed
    const auto it = row.second.find("compiled");
    any_compiled = any_compiled || (it != row.second.end() && !it->second.times_us.empty());
  }
  std::string head = pad("op", 20) + pad("preset", 20) + pad("dtype", 9) + pad("backend", 9) + pad("mode", 14) +
                     right("median", 10) + right("spread", 8) + right("GB/s", 8) + right("%copy_", 8) +
                     right("%peak", 8) + right("x base", 8);
  if (any_compiled) head += right("x compile", 10);
  if (!rows_.empty() && backward_) out << "forward+backward: each row times one forward and one backward\n";
  if (!rows_.empty()) out << head << "\n" << std::string(head.size(), '-') << "\n";
  std::vector<CopyTiming> copies;
  bool any_selected = false;
  for (const auto& row : rows_) {
    const auto& [op, backend, shape_dtype] = row.first;
    const std::string dtype = shape_dtype.substr(shape_dtype.rfind('_') + 1);
    if (const auto it = row.second.find("copy_"); it != row.second.end() && it->second.error.empty())
      for (size_t i = 0; i < it->second.times_us.size() && i < it->second.bytes_per_second.size(); ++i)
        copies.push_back({backend, dtype,
                          std::llround(it->second.bytes_per_second[i] * it->second.times_us[i] * 1e-6),
                          it->second.times_us[i]});
    // A backend's shared rows alone make no line; the selected implementation's row is its own line.
    for (const char* impl : {"backplane", "selected"})
      if (const auto it = row.second.find(impl); it != row.second.end()) {
        out << line(op, backend, shape_dtype, it->second, any_compiled);
        any_selected = any_selected || std::string(impl) == "selected";
      }
  }
  if (!rows_.empty())
    out << "(median per call; mode: eager calls, graph: CUDA graph replays, compile: torch.compile"
        << (any_selected ? " of the op as the selection in force serves it (torch.compile(selected))" : "")
        << "; spread: half the interquartile range of the samples (of the repetitions' range with "
           "--repetitions N) over the median; GB/s: "
        << (backward_ ? "the least forward+backward traffic (the JSON's bytes_counted)"
                      : "each input read once, each output written once")
        << ", 1 GB = 1e9 B; %peak: the registry's flops: per element of the largest Tensor argument, per second, "
           "over the device's FMA rate measured in this run (the JSON's peak_flops); "
           "x base > 1: faster than PyTorch's baseline on the same device; formulas: the JSON's labels)\n";
  for (const auto& [key, ns] : call_ns_) {
    const auto& [op, backend, impl] = key;
    out << "host cost per call, " << op << " on " << backend << " (" << impl << "): " << formatted("%.0f", median_of(ns))
        << " ns\n";
  }
  for (const auto& line : noisy_copy_groups(copies))
    out << "WARNING: noisy run, figures unreliable (a busy machine?): " << line << "\n";
  return out.str();
}

}  // namespace backplane::bench
