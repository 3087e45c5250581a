// backplane_bench: every registry op on every selected backend, beside PyTorch.
//   backplane_bench [--backends=cpu,cuda] [Google Benchmark flags]
// Backends: --backends, else BACKPLANE_BACKENDS, else "cpu". For a table:
//   backplane_bench --benchmark_out=bench.json --benchmark_out_format=json
//   python3 bench/report.py bench.json [--plot bench.png]
#include "backend_selection.h"
#include "call_overhead.h"
#include "op_workloads.h"

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/version.h>

#include <iostream>
#include <stdexcept>

namespace {

void print_help() {
  std::cout << "backplane_bench [--backends=NAME,...] [benchmark flags]\n"
               "  --backends=cpu,cuda  backends to load by name (default: BACKPLANE_BACKENDS, else cpu);\n"
               "                       one that cannot load or has no device here is skipped, with its reason\n"
               "  rows are <op>/<backend>/<impl>/<size>; bytes_per_second counts each input read once and\n"
               "  each output written once; copy_ rows are the device's copy bandwidth\n\n";
  benchmark::PrintDefaultHelp();
}

void add_context(const backplane::bench::BackendSelection& selection) {
  benchmark::AddCustomContext("torch_version", TORCH_VERSION);
  benchmark::AddCustomContext("aten_threads", std::to_string(at::get_num_threads()));
  benchmark::AddCustomContext("bytes_counted", "minimal traffic: each input read once, each output written once");
  benchmark::AddCustomContext("timing", "cpu: wall clock; other devices: device events on the current stream");
  for (const auto& b : selection.selected)
    benchmark::AddCustomContext("backend." + b.name, b.record.path + " (version " + b.record.version + ", key " +
                                                         b.record.dispatch_key + ", device " + b.device.str() + ")");
  for (const auto& s : selection.skipped) benchmark::AddCustomContext("skipped." + s.name, s.reason);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names;
  try {
    names = backplane::bench::take_backend_names(&argc, argv);
  } catch (const std::invalid_argument& e) {
    std::cerr << "backplane_bench: " << e.what() << "\n";
    return 2;
  }
  benchmark::Initialize(&argc, argv, print_help);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  const auto selection = backplane::bench::select_backends(names);
  for (const auto& s : selection.skipped)
    std::cerr << "backplane_bench: skipping backend '" << s.name << "': " << s.reason << "\n";
  if (selection.selected.empty()) {
    std::cerr << "backplane_bench: no backend left to benchmark\n";
    return 1;
  }
  add_context(selection);
  for (const auto& backend : selection.selected) {
    backplane::bench::register_op_benchmarks(backend);
    backplane::bench::register_call_overhead(backend);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
