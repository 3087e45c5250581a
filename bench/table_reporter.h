// Console output of backplane_bench, made for people: while rows run, one progress line on
// a terminal (stderr, rewritten in place with \r; nothing when stderr is not a terminal),
// then the run's table on stdout (console_table.h, which formats it). No Google Benchmark
// console, no escape codes; the long baseline formulas are in the JSON only.
#pragma once

#include "console_table.h"

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace backplane::bench {

class TableReporter : public benchmark::BenchmarkReporter {
 public:
  // expected_rows: op rows registered (for "n/N" in the progress line); shared_rows:
  // backend -> the backend whose reference and copy_ rows it shares (same device);
  // backward: the rows time forward+backward (--backward), which the table's title says.
  TableReporter(int expected_rows, std::map<std::string, std::string> shared_rows, bool backward = false);
  // The %peak column's denominators: the run's measured peak FLOP/s per (backend, dtype).
  void set_peak_flops(const std::string& backend, const std::string& dtype, double flops_per_second) {
    table_.set_peak_flops(backend, dtype, flops_per_second);
  }
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

 private:
  void progress(const std::string& name);

  int expected_rows_ = 0, done_rows_ = 0;
  bool on_terminal_ = false;
  size_t progress_width_ = 0;
  ConsoleTable table_;
};

}  // namespace backplane::bench
