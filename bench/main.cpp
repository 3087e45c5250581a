// backplane_bench: every registry op on every selected backend, beside PyTorch's own op
// and the device's copy_ bandwidth. The engine of `backplane bench`.
//   backplane_bench [--backends=cpu,cuda] [--ops=..] [--dtypes=..] [--shapes=..] [--min-time=S]
//                   [--max-time=S] [--cuda-graph] [--backward] [--cold-l2] [Google Benchmark flags]
// Prints a progress line on a terminal, then one table (table_reporter.h); with
// --benchmark_out=F.json the JSON is Google Benchmark's, which `backplane bench` reads
// (--input, --compare; python/backplane/bench/results.py).
#include "backend_selection.h"
#include "bench_options.h"
#include "call_overhead.h"
#include "cold_cache.h"
#include "op_workloads.h"
#include "peak_flops.h"
#include "recorded_batch.h"
#include "table_reporter.h"
#include "workload_timing.h"

#include <backplane/registry.h>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/version.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <iostream>
#include <stdexcept>
#include <string>

namespace {

void print_help() {
  std::cout << "backplane_bench [--backends=NAME,...] [--ops=..] [--dtypes=..] [--shapes=..] [--cuda-graph] "
               "[--backward] [benchmark flags]\n"
               "  --backends=cpu,cuda  backends to load by name (default: BACKPLANE_BACKENDS, else cpu);\n"
               "                       one that cannot load or has no device here is skipped, with its reason\n"
               "  --ops=add,rms_norm   these registry ops (default: all)\n"
               "  --dtypes=float32,... float32, float64, float16, bfloat16 (default: float32,bfloat16)\n"
               "  --shapes=NAME,...    the registry's bench presets by name, or all (default: each op's first)\n"
               "  --min-time=SECONDS   least time each row samples (default 0.05)\n"
               "  --max-time=SECONDS   most time each row samples (default 0.5); in between a row stops once the\n"
               "                       spread of its samples is below 2%\n"
               "  --cuda-graph         time cuda rows as replays of a CUDA graph of each batch of calls: the\n"
               "                       kernels' time without the host's launch cost (other devices as usual)\n"
               "  --backward           time forward+backward of each op with a backward: in the registry (its\n"
               "                       gradients checked against the baseline's first); others are skipped\n"
               "  --cold-l2            cuda rows: each sample one call, after an untimed write of twice the\n"
               "                       device's L2 cache (cold inputs, as nvbench's cold mode); other rows as usual\n"
               "  every backplane row is checked against its reference before it is timed\n"
               "  rows are <op>/<backend>/<impl>/<size>; bytes_per_second counts each input read once and\n"
               "  each output written once (--backward: the least both passes move, the JSON's bytes_counted);\n"
               "  copy_ rows are the device's copy bandwidth; the context's peak_flops.<backend>.<dtype> its FMA\n"
               "  rate, measured before the rows (the table's %peak, where the registry gives the op's flops:)\n\n";
  benchmark::PrintDefaultHelp();
}

// The CPU's model name from /proc/cpuinfo's first "model name" line, so two machines
// that share a host name ("vm") tell apart in a report; empty where there is none (not
// Linux, or a processor whose cpuinfo names no model), and then not recorded.
std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto begin = line.find_first_not_of(" \t", colon + 1);
    return begin == std::string::npos ? std::string() : line.substr(begin);
  }
  return {};
}

// The peak FMA rate of each selected backend's device for each dtype the run times
// (measured once per device and opmath dtype: peak_flops.h), keyed (backend, dtype name),
// with one line per device saying how it was measured or why not.
struct RunPeaks {
  std::map<std::pair<std::string, std::string>, double> flops_per_second;
  std::string method;
};

RunPeaks measure_peaks(const backplane::bench::BackendSelection& selection,
                       const std::vector<c10::ScalarType>& dtypes) {
  using backplane::bench::peak_dtype;
  RunPeaks peaks;
  std::map<std::pair<std::string, c10::ScalarType>, double> measured;  // (device, opmath dtype) -> FLOP/s; 0: failed
  std::map<std::string, std::string> notes;                           // device -> how, or why not
  for (const auto& b : selection.selected) {
    const std::string device = b.device.str();
    for (const auto dtype : dtypes) {
      const auto key = std::make_pair(device, peak_dtype(dtype));
      if (!measured.count(key)) {
        std::string note = backplane::dtype_name(key.second);
        try {
          const auto rate = backplane::bench::measure_peak_flops(b.device, key.second);
          measured[key] = rate.flops_per_second;
          note += ": " + rate.how;
        } catch (const std::exception& e) {
          measured[key] = 0;
          note += " not measured: " + std::string(e.what());
        }
        notes[device] += (notes[device].empty() ? "" : ", ") + note;
      }
      if (measured[key] > 0) peaks.flops_per_second[{b.name, backplane::dtype_name(dtype)}] = measured[key];
    }
  }
  for (const auto& [device, note] : notes) peaks.method += device + ": " + note + "; ";
  peaks.method += "FLOP/s of fused multiply-adds (2 FLOPs each) on CUDA cores or CPU vector units, the best of 3 "
                  "runs; float16 and bfloat16 rows are read against float32's rate, their opmath dtype";
  return peaks;
}

void add_context(const backplane::bench::BackendSelection& selection, bool cuda_graph, bool backward,
                 const backplane::bench::StopRule& stop, const std::map<std::string, std::string>& shared_rows,
                 const std::string& cache, const RunPeaks& peaks) {
  if (const std::string model = cpu_model(); !model.empty()) benchmark::AddCustomContext("cpu_model", model);
  benchmark::AddCustomContext("torch_version", TORCH_VERSION);
  benchmark::AddCustomContext("aten_threads", std::to_string(at::get_num_threads()));
  benchmark::AddCustomContext("pass", backward ? "forward+backward" : "forward");
  benchmark::AddCustomContext(
      "bytes_counted",
      backward ? "minimal forward+backward traffic: the forward reads each input once (an expanded one: its distinct "
                 "elements) and writes each output; the backward reads the output gradients and the tensors its "
                 "registry formulas name (result: the output) and writes one gradient per differentiable input, "
                 "except a gradient that is grad itself"
               : "minimal traffic: each input read once (an expanded one: its distinct elements), each output "
                 "written once");
  benchmark::AddCustomContext("stopping", "samples of about 1 ms until their spread is below " +
                                             std::to_string(int(stop.target_spread * 100)) + "%, for " +
                                             std::to_string(stop.min_seconds) + " to " +
                                             std::to_string(stop.max_seconds) + " s per row");
  benchmark::AddCustomContext("timing", cuda_graph ? "cpu: wall clock; cuda: CUDA graph replays of each batch of "
                                                    "calls, between events; other devices: device events on the "
                                                    "current stream"
                                                  : "cpu: wall clock; other devices: device events on the current "
                                                    "stream");
  benchmark::AddCustomContext("cache", cache);
  benchmark::AddCustomContext("peak_flops", peaks.method);
  for (const auto& [key, rate] : peaks.flops_per_second) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.6g", rate);
    benchmark::AddCustomContext("peak_flops." + key.first + "." + key.second, text);
  }
  for (const auto& b : selection.selected)
    benchmark::AddCustomContext("backend." + b.name, b.record.path + " (version " + b.record.version + ", key " +
                                                         b.record.dispatch_key + ", device " + b.device.str() + ")");
  for (const auto& s : selection.skipped) benchmark::AddCustomContext("skipped." + s.name, s.reason);
  for (const auto& [backend, owner] : shared_rows)
    if (owner != backend) benchmark::AddCustomContext("shared_rows." + backend, owner);
}

// Backend -> the first selected backend on its device, whose reference and copy_ rows
// the device's other backends share (timed once per device).
std::map<std::string, std::string> device_row_owners(const backplane::bench::BackendSelection& selection) {
  std::map<std::string, std::string> owner_of_device, owners;
  for (const auto& b : selection.selected) owners[b.name] = owner_of_device.emplace(b.device.str(), b.name).first->second;
  return owners;
}

// Google Benchmark's JSON file reporter, which notices a write that failed (a full disk,
// /dev/full): Google Benchmark owns the file and never checks it. JSON only, the format
// `backplane bench` asks for; another --benchmark_out_format goes unchecked.
class CheckedJsonReporter : public benchmark::JSONReporter {
 public:
  bool ReportContext(const Context& context) override {
    const bool ok = JSONReporter::ReportContext(context);
    note_failure();
    return ok;
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    JSONReporter::ReportRuns(runs);
    note_failure();
  }
  void Finalize() override {
    JSONReporter::Finalize();
    GetOutputStream().flush();
    note_failure();
  }
  // Empty: every byte was written.
  const std::string& failure() const { return failure_; }

 private:
  void note_failure() {  // the first failure's errno, before later calls overwrite it
    if (failure_.empty() && !GetOutputStream()) failure_ = errno ? std::strerror(errno) : "write failed";
  }
  std::string failure_;
};

// Refused before any row is timed: a --benchmark_out file that cannot be opened
// (Google Benchmark would exit 1, the code of a failed run, only once it starts).
std::string unopenable(const std::string& path) {
  errno = 0;
  std::ofstream probe(path, std::ios::app);
  return probe ? std::string() : errno ? std::strerror(errno) : "cannot open";
}

}  // namespace

int main(int argc, char** argv) {
  backplane::bench::BenchOptions options;
  try {
    options = backplane::bench::take_bench_options(&argc, argv);
  } catch (const std::invalid_argument& e) {
    std::cerr << "backplane_bench: " << e.what() << "\n";
    return 2;
  }
  benchmark::Initialize(&argc, argv, print_help);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  const auto selection = backplane::bench::select_backends(options.backends);
  for (const auto& s : selection.skipped)
    std::cerr << "backplane_bench: skipping backend '" << s.name << "': " << s.reason << "\n";
  if (selection.selected.empty()) {
    std::cerr << "backplane_bench: no backend left to benchmark\n";
    return 1;
  }
  try {
    backplane::bench::check_names(options);
  } catch (const std::invalid_argument& e) {
    std::cerr << "backplane_bench: " << e.what() << "\n";
    return 2;
  }
  if (options.cuda_graph) {
    // Refused before any row runs: no CUDA backend to record, or no module to record with.
    std::string selected;
    bool any_cuda = false;
    for (const auto& b : selection.selected) {
      selected += (selected.empty() ? "" : ", ") + b.name + " (" + b.device.str() + ")";
      any_cuda = any_cuda || b.device.is_cuda();
    }
    std::string refusal;
    if (!any_cuda) {
      refusal = "no selected backend runs on a CUDA device; selected: " + selected;
    } else {
      try {
        backplane::bench::require_cuda_graph_module();
      } catch (const std::runtime_error& e) {
        refusal = e.what();
      }
    }
    if (!refusal.empty()) {
      std::cerr << "backplane_bench: --cuda-graph: " << refusal << "\n";
      return 2;
    }
  }
  // --cold-l2: each cuda device's L2 size, read now so that a build without the CUDA module
  // is refused before any row runs; no cuda backend: the flag changes nothing, as the context says.
  std::string cache = "warm: each row calls the op on the same inputs back to back (inputs smaller than a cache "
                      "stay in it)";
  if (options.cold_l2) {
    std::string flushed;
    try {
      for (const auto& b : selection.selected)
        if (b.device.is_cuda() && flushed.find(b.device.str() + " ") == std::string::npos)
          flushed += (flushed.empty() ? "" : ", ") + b.device.str() + " " +
                     std::to_string(2 * backplane::bench::cuda_l2_bytes(b.device)) + " bytes";
    } catch (const std::runtime_error& e) {
      std::cerr << "backplane_bench: --cold-l2: " << e.what() << "\n";
      return 2;
    }
    cache = "cold L2 (--cold-l2): " +
            (flushed.empty() ? std::string("no cuda row in this run, so no row was flushed")
                             : "each sample of a cuda row is one call after an untimed write of twice the device's "
                               "L2 cache (" + flushed + "), outside the timed events (with --cuda-graph: ahead of "
                               "the timed replay)") +
            "; cpu and other devices' rows: warm, as without the flag";
  }
  if (!options.out_file.empty()) {
    if (const std::string why = unopenable(options.out_file); !why.empty()) {
      std::cerr << "backplane_bench: --benchmark_out: cannot write " << options.out_file << ": " << why << "\n";
      return 2;
    }
  }
  const auto owners = device_row_owners(selection);
  const RunPeaks peaks = measure_peaks(selection, options.dtypes);
  add_context(selection, options.cuda_graph, options.backward, options.stop, owners, cache, peaks);
  backplane::bench::set_stop_rule(options.stop);
  backplane::bench::set_cuda_graph(options.cuda_graph);
  backplane::bench::set_cold_l2(options.cold_l2);
  for (const auto& backend : selection.selected) {
    backplane::bench::register_op_benchmarks(backend, options, owners.at(backend.name) == backend.name);
    // The host cost of a forward call: not a forward+backward run's figure.
    if (options.ops.empty() && !options.backward) backplane::bench::register_call_overhead(backend);
  }
  backplane::bench::TableReporter table(backplane::bench::registered_workloads(), owners, options.backward);
  for (const auto& [key, rate] : peaks.flops_per_second) table.set_peak_flops(key.first, key.second, rate);
  CheckedJsonReporter json;
  const bool checked = !options.out_file.empty() && options.out_json;
  benchmark::RunSpecifiedBenchmarks(&table, checked ? &json : nullptr);
  benchmark::Shutdown();
  if (checked && !json.failure().empty()) {
    std::cerr << "backplane_bench: --benchmark_out: writing " << options.out_file << " failed: " << json.failure()
              << "\n";
    return 2;
  }
  return 0;
}
