#include "table_reporter.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace backplane::bench {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  return parts;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Google Benchmark renamed Run::error_occurred to Run::skipped (1.8); both are served.
template <typename R>
bool failed(const R& run) {
  if constexpr (requires { run.error_occurred; }) return run.error_occurred;
  else return static_cast<bool>(run.skipped);
}
template <typename R>
std::string failure_message(const R& run) {
  if constexpr (requires { run.error_message; }) return run.error_message;
  else return run.skip_message;
}

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, value);
  return buf;
}

}  // namespace

void TableReporter::ReportRuns(const std::vector<Run>& runs) {
  ConsoleReporter::ReportRuns(runs);
  for (const Run& run : runs) {
    if (!run.aggregate_name.empty()) continue;  // recomputed from the repetitions below
    const auto parts = split(run.run_name.function_name, '/');
    // Op rows only: call_overhead_<op>/<backend>/<impl>/1 rows are host cost per call,
    // shown in Google Benchmark's lines above.
    if (parts.size() != 4 || parts[0].rfind("call_overhead_", 0) == 0) continue;
    Samples& s = rows_[{parts[0], parts[1], parts[3]}][parts[2]];
    if (failed(run)) {
      s.error = failure_message(run);
      continue;
    }
    s.times_us.push_back(run.GetAdjustedRealTime());
    auto bps = run.counters.find("bytes_per_second");
    if (bps != run.counters.end()) s.bytes_per_second.push_back(bps->second.value);
  }
}

void TableReporter::Finalize() {
  ConsoleReporter::Finalize();
  if (rows_.empty()) return;
  std::ostream& out = GetOutputStream();
  out << "\nop/backend/shape_dtype                                  backplane us (spread)    GB/s  %copy_  "
         "x reference\n";
  for (const auto& row : rows_) {
    const auto& [op, backend, shape] = row.first;
    const auto& impls = row.second;  // a named reference: clang 14 cannot capture a binding
    std::string name = op + "/" + backend + "/" + shape;
    name.resize(std::max<size_t>(name.size(), 54), ' ');
    out << name << " ";
    auto get = [&](const char* impl) -> const Samples* {
      auto it = impls.find(impl);
      return it == impls.end() ? nullptr : &it->second;
    };
    const Samples* mine = get("backplane");
    const Samples* ref = get("reference");
    const Samples* copy = get("copy_");
    if (!mine) {
      out << "(not implemented on " << backend << ")\n";
      continue;
    }
    if (!mine->error.empty()) {
      out << "FAILED: " << mine->error << "\n";
      continue;
    }
    if (mine->times_us.empty()) {
      out << "(no runs)\n";
      continue;
    }
    const double t = median(mine->times_us);
    const auto [lo, hi] = std::minmax_element(mine->times_us.begin(), mine->times_us.end());
    const double spread = mine->times_us.size() > 1 ? 100.0 * (*hi - *lo) / (2 * t) : 0.0;
    std::string time = fixed(t, t < 10 ? 2 : 1) + " (" + (mine->times_us.size() > 1 ? "±" + fixed(spread, 1) + "%" : "1 run") + ")";
    time.resize(std::max<size_t>(time.size(), 22), ' ');
    out << time;
    const double gbps = mine->bytes_per_second.empty() ? 0 : median(mine->bytes_per_second) / 1e9;
    out << " " << fixed(gbps, 1);
    if (copy && copy->error.empty() && !copy->bytes_per_second.empty())
      out << "  " << fixed(100.0 * gbps * 1e9 / median(copy->bytes_per_second), 0) << "%";
    else
      out << "  -";
    if (ref && ref->error.empty() && !ref->times_us.empty())
      out << "  " << fixed(median(ref->times_us) / t, 2) << "x";
    else
      out << "  -";
    out << "\n";
  }
  out << "(GB/s: bytes each input read once and each output written once, 1 GB = 1e9 B; x reference > 1: "
         "faster than PyTorch's op)\n";
}

}  // namespace backplane::bench
