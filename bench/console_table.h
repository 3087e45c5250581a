// The bench's console table, its one formatter: the engine prints it at the end of a run
// (table_reporter.h), and the Python side prints it for runs the engine did not print
// (read back with --input, merged, or with torch.compile rows added) through the C ABI of
// bench/c_api.cpp. Per op, preset, dtype and backend: the mode the row was timed in (eager
// calls, graph: CUDA graph replays, compile: torch.compile), the median time per call, its
// spread, GB/s (1 GB = 1e9 bytes), percent of the device's copy_ bandwidth measured in the
// same run, percent of its measured peak FMA rate where the op's FLOPs are known (peak_flops.h),
// and the speed against the op's PyTorch baseline (and torch.compile's, where such rows
// were timed). A line per backplane row, and one per `selected` row (the op as the selection
// in force serves it, under torch.compile: `backplane bench --mode compile`). Then the host
// cost per call of the call_overhead_ rows, and a warning line per group of copy_ rows that
// disagree (noisy_copy.h). Rows are added one repetition at a time, as Google Benchmark
// reports them, named <op>/<backend>/<impl>/<shape>_<dtype>.
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
  // (neither an op row nor a call_overhead_ row), which is then ignored. flops: per call
  // (the JSON's "flops"); mode: eager, graph, compile or compile+graph.
  bool add_run(const std::string& run_name, double seconds, std::optional<double> bytes_per_second,
               std::optional<double> spread, const std::string& error, std::optional<double> flops = std::nullopt,
               const std::string& mode = "eager");

  // The measured peak FLOP/s of `backend`'s device for rows of `dtype` (the run's context
  // "peak_flops.<backend>.<dtype>"): the %peak column's denominator.
  void set_peak_flops(const std::string& backend, const std::string& dtype, double flops_per_second);

  bool empty() const { return rows_.empty() && call_ns_.empty(); }
  std::string format() const;

 private:
  struct Samples {
    std::vector<double> times_us;  // one per repetition
    std::vector<double> bytes_per_second;
    std::vector<double> spreads;   // the samples' spread of each repetition
    std::vector<double> flops;     // per call, where the row's FLOPs are known
    std::string mode = "eager";
    std::string error;
  };
  std::optional<double> peak_of(const std::string& backend, const std::string& dtype) const;
  // The line of one row (impl backplane or selected) of (op, backend, shape_dtype).
  std::string line(const std::string& op, const std::string& backend, const std::string& shape_dtype,
                   const Samples& mine, bool any_compiled) const;
  const Samples* find(const std::string& op, const std::string& backend, const std::string& shape,
                      const std::string& impl) const;

  bool backward_ = false;
  std::map<std::string, std::string> shared_rows_;
  std::map<std::pair<std::string, std::string>, double> peak_flops_;  // (backend, dtype) -> FLOP/s
  // (op, backend, shape_dtype) -> impl -> samples
  std::map<std::tuple<std::string, std::string, std::string>, std::map<std::string, Samples>> rows_;
  // call_overhead_<op>/<backend>/<impl>: host ns per call
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>> call_ns_;
};

}  // namespace backplane::bench
