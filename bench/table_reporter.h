// Console output of backplane_bench: Google Benchmark's usual line per run (progress),
// then one table, each op x backend x shape x dtype on a line: backplane's median time
// and spread over the repetitions, GB/s (1 GB = 1e9 bytes), percent of the device's
// copy_ bandwidth measured in the same run, and the speed ratio against the op's
// PyTorch reference on the same device. A row whose result was wrong, or that failed,
// says so instead of a time.
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace backplane::bench {

class TableReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

 private:
  struct Samples {
    std::vector<double> times_us;  // one per repetition
    std::vector<double> bytes_per_second;
    std::string error;
  };
  // (op, backend, shape_dtype) -> impl -> samples
  std::map<std::tuple<std::string, std::string, std::string>, std::map<std::string, Samples>> rows_;
};

}  // namespace backplane::bench
