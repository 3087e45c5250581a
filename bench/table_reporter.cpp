#include "table_reporter.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>

namespace backplane::bench {
namespace {

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

std::optional<double> counter(const benchmark::BenchmarkReporter::Run& run, const char* name) {
  const auto it = run.counters.find(name);
  return it == run.counters.end() ? std::nullopt : std::optional<double>(it->second.value);
}

}  // namespace

TableReporter::TableReporter(int expected_rows, std::map<std::string, std::string> shared_rows, bool backward)
    : expected_rows_(expected_rows), on_terminal_(isatty(STDERR_FILENO) == 1), table_(std::move(shared_rows), backward) {}

bool TableReporter::ReportContext(const Context&) { return true; }  // the JSON keeps the context

void TableReporter::progress(const std::string& name) {
  if (!on_terminal_) return;
  std::string line = "[" + std::to_string(done_rows_) + "/" + std::to_string(expected_rows_) + "] " + name;
  const size_t width = line.size();
  line.resize(std::max(width, progress_width_), ' ');  // covers a longer previous line
  progress_width_ = width;
  std::cerr << "\r" << line << std::flush;
}

void TableReporter::ReportRuns(const std::vector<Run>& runs) {
  for (const Run& run : runs) {
    if (!run.aggregate_name.empty()) continue;  // recomputed from the repetitions
    const std::string& name = run.run_name.function_name;
    const double seconds = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
    const std::string error = failed(run) ? failure_message(run) : "";
    // The engine times eager calls, or CUDA graph replays (--cuda-graph's cuda rows); torch.compile rows are
    // timed by the Python side (python/backplane/bench/compiled.py).
    const std::string mode = counter(run, "cuda_graph").value_or(0) > 0 ? "graph" : "eager";
    if (!table_.add_run(name, seconds, counter(run, "bytes_per_second"), counter(run, "spread"), error,
                        counter(run, "flops"), mode))
      continue;
    if (name.rfind("call_overhead_", 0) == 0) continue;  // not an op row: no progress
    if (run.repetition_index <= 0) ++done_rows_;
    progress(name);
  }
}

void TableReporter::Finalize() {
  if (on_terminal_ && progress_width_) std::cerr << "\r" << std::string(progress_width_, ' ') << "\r" << std::flush;
  std::ostream& out = GetOutputStream();
  out << table_.format();
  out.flush();
}

}  // namespace backplane::bench
