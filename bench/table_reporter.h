// Console output of backplane_bench, made for people: while rows run, one progress line on
// a terminal (stderr, rewritten in place with \r; nothing when stderr is not a terminal),
// then one table on stdout: per op, preset, dtype and backend the median time per call,
// its spread, GB/s (1 GB = 1e9 bytes), percent of the device's copy_ bandwidth measured in
// the same run, and the speed against the op's PyTorch baseline (and torch.compile's,
// where such rows were timed). No Google Benchmark console, no escape codes; the long
// baseline formulas are in the JSON only. A noisy run (copy_ rows of the same bytes that
// disagree, noisy_copy.h) ends with a warning line.
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace backplane::bench {

class TableReporter : public benchmark::BenchmarkReporter {
 public:
  // expected_rows: op rows registered (for "n/N" in the progress line); shared_rows:
  // backend -> the backend whose reference and copy_ rows it shares (same device);
  // backward: the rows time forward+backward (--backward), which the table's title says.
  TableReporter(int expected_rows, std::map<std::string, std::string> shared_rows, bool backward = false);
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

 private:
  struct Samples {
    std::vector<double> times_us;  // one per repetition
    std::vector<double> bytes_per_second;
    std::vector<double> spreads;   // the samples' spread of each repetition
    std::string error;
  };
  const Samples* find(const std::string& op, const std::string& backend, const std::string& shape,
                      const std::string& impl) const;
  void progress(const std::string& name);

  int expected_rows_ = 0, done_rows_ = 0;
  bool backward_ = false;
  bool on_terminal_ = false;
  size_t progress_width_ = 0;
  std::map<std::string, std::string> shared_rows_;
  // (op, backend, shape_dtype) -> impl -> samples
  std::map<std::tuple<std::string, std::string, std::string>, std::map<std::string, Samples>> rows_;
  // call_overhead_<op>/<backend>/<impl>: host ns per call
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>> call_ns_;
};

}  // namespace backplane::bench
