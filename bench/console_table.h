// The bench's console table, its one formatter: the engine prints it at the end of a run
// (table_reporter.h), and the Python side prints it for runs the engine did not print
// (read back with --input, merged, or with torch.compile rows added) through the C ABI of
// bench/c_api.cpp. Per op, preset, dtype and backend: the median time per call, its spread,
// GB/s (1 GB = 1e9 bytes), percent of the device's copy_ bandwidth measured in the same
// run, and the speed against the op's PyTorch baseline (and torch.compile's, where such
// rows were timed); then the host cost per call of the call_overhead_ rows, and a warning
// line per group of copy_ rows that disagree (noisy_copy.h). Rows are added one repetition
// at a time, as Google Benchmark reports them, named <op>/<backend>/<impl>/<shape>_<dtype>.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace backplane::bench {

class ConsoleTable {
 public:
  // shared_rows: backend -> the backend whose reference and copy_ rows it shares (same
  // device); backward: the rows time forward+backward (--backward), which the title says.
  ConsoleTable(std::map<std::string, std::string> shared_rows, bool backward);

  // One repetition of the row `run_name`; false for a name that is not a row of the table
  // (neither an op row nor a call_overhead_ row), which is then ignored.
  bool add_run(const std::string& run_name, double seconds, std::optional<double> bytes_per_second,
               std::optional<double> spread, const std::string& error);

  bool empty() const { return rows_.empty() && call_ns_.empty(); }
  std::string format() const;

 private:
  struct Samples {
    std::vector<double> times_us;  // one per repetition
    std::vector<double> bytes_per_second;
    std::vector<double> spreads;   // the samples' spread of each repetition
    std::string error;
  };
  const Samples* find(const std::string& op, const std::string& backend, const std::string& shape,
                      const std::string& impl) const;

  bool backward_ = false;
  std::map<std::string, std::string> shared_rows_;
  // (op, backend, shape_dtype) -> impl -> samples
  std::map<std::tuple<std::string, std::string, std::string>, std::map<std::string, Samples>> rows_;
  // call_overhead_<op>/<backend>/<impl>: host ns per call
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>> call_ns_;
};

}  // namespace backplane::bench
