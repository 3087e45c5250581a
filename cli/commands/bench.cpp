// `backplane bench`: the benchmark engine (backplane_bench, Google Benchmark, beside this
// command) with the selection flags translated; comparisons and plots are done by the
// Python side (`python -m backplane bench`, python/backplane/bench/), which this command runs
// for --compare, --compare-backends, --plot and --side-by-side, the torch.compile rows and
// the rows of plugins of kind triton (which load only in Python).
#include "cli.h"

#include <backplane/selection.h>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace backplane::cli {
namespace {

namespace fs = std::filesystem;

// Google Benchmark aborts on a negative count and runs no row at 0; the engine checks
// again (bench_options.h), this names the flag as the user wrote it.
constexpr long kMaxRepetitions = 1000;

bool valid_repetitions(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(text.c_str(), &end, 10);
  return !text.empty() && !*end && !errno && n >= 1 && n <= kMaxRepetitions;
}

// The records of the backends the run selects (named, else BACKPLANE_BACKENDS, else cpu,
// as the engine chooses), read from their manifests without loading any; none where the
// list is bad (the engine reports a bad list or what it cannot find).
std::vector<BackendRecord> selected_records(const Options& options) {
  std::vector<std::string> names = {"cpu"};
  std::vector<BackendRecord> found, selected;
  try {
    if (options.backends)
      names = *options.backends;
    else if (const char* env = std::getenv("BACKPLANE_BACKENDS"); env && *env)
      names = backend_names(env, "BACKPLANE_BACKENDS", "");
    found = backends(options.load);
  } catch (const std::exception&) {
    return {};
  }
  for (const auto& name : names)
    for (const auto& r : found)
      if (r.name == name) selected.push_back(r);
  return selected;
}

bool any_on_cuda(const std::vector<BackendRecord>& selected) {
  for (const auto& r : selected)
    if (r.dispatch_key == "CUDA") return true;
  return false;
}

// A plugin of kind triton loads only in a Python process: the engine cannot time it, and
// the Python side times its rows after the engine's (python/backplane/bench/triton_rows.py).
bool any_triton(const std::vector<BackendRecord>& selected) {
  for (const auto& r : selected)
    if (r.kind == "triton") return true;
  return false;
}

}  // namespace

int bench_command(const Options& options) {
  std::string backends;
  if (options.backends)
    for (const auto& b : *options.backends) backends += (backends.empty() ? "" : ",") + b;
  std::string ops;  // validated against the registry by the command line parser
  for (const auto& op : options.ops) ops += (ops.empty() ? "" : ",") + op;
  pass_common_flags_on(options);
  bool python_side = false, compile = false, no_compile = false;
  for (const auto& arg : options.rest) {
    if (arg == "--compare" || arg == "--compare-backends" || arg == "--plot" || arg == "--side-by-side") python_side = true;
    compile = compile || arg == "--compile";
    no_compile = no_compile || arg == "--no-compile";
  }
  // --mode (compile: the selected implementation's rows under torch.compile) is Python's too.
  for (size_t i = 0; i + 1 < options.rest.size(); ++i)
    if (options.rest[i] == "--mode" && options.rest[i + 1] != "eager") python_side = true;
  // torch.compile rows (the "x compile" column) are Python's: with --compile, and by default
  // where a selected backend runs on CUDA.
  const std::vector<BackendRecord> selected = selected_records(options);
  warn_unoptimised_plugins(selected);  // both sides time what the manifests say was built
  if (compile || (!no_compile && any_on_cuda(selected))) python_side = true;
  if (any_triton(selected)) python_side = true;

  if (python_side) {  // the Python side runs the engine too
    std::vector<std::string> args = {"bench"};
    if (!backends.empty()) args.insert(args.end(), {"--backends", backends});
    if (!ops.empty()) args.insert(args.end(), {"--ops", ops});
    args.insert(args.end(), options.rest.begin(), options.rest.end());
    // Triton plugins' rows (any_triton) need this Python too; the reason names the common cases.
    return exec_python_side("bench", args, "--compare/--plot/--side-by-side and the torch.compile rows");
  }

  const fs::path engine = command_dir().value_or(".") / "backplane_bench";
  if (!fs::exists(engine)) {
    std::cerr << "backplane bench: " << engine.string()
              << " not found: the benchmark engine is built with BACKPLANE_BUILD_BENCH=ON (Google Benchmark; "
                 "`make build` does it)\n";
    return kExitFailed;
  }
  std::vector<std::string> args = {engine.string()};
  if (!backends.empty()) args.push_back("--backends=" + backends);
  if (!ops.empty()) args.push_back("--ops=" + ops);
  std::string repetitions = "1";  // each row samples until stable (bench/adaptive_stop.h)
  for (size_t i = 0; i < options.rest.size(); ++i) {
    const std::string& flag = options.rest[i];
    if (flag == "--no-compile") continue;  // the engine times no compiled rows
    if (flag == "--interleave") {  // the engine's flags without a value
      args.push_back("--benchmark_enable_random_interleaving=true");
      continue;
    }
    if (flag == "--cuda-graph" || flag == "--backward" || flag == "--cold-l2") {
      args.push_back(flag);
      continue;
    }
    if (i + 1 == options.rest.size()) break;  // the parser gives every other flag its value
    const std::string& value = options.rest[++i];
    if (flag == "--json") {
      args.push_back("--benchmark_out=" + value);
      args.push_back("--benchmark_out_format=json");
    } else if (flag == "--repetitions") {
      if (!valid_repetitions(value)) {
        std::cerr << "backplane bench: --repetitions: expected a whole number from 1 to " << kMaxRepetitions
                  << ", found '" << value << "'\n";
        return kExitUsage;
      }
      repetitions = value;
    } else if (flag == "--min-time" || flag == "--max-time") {
      args.push_back(flag + "=" + value);
    } else if (flag == "--threshold" || flag == "--mode") {
      continue;  // --compare's (the Python side); --mode eager: the engine's own way
    } else {  // --ops, --dtypes, --shapes: the engine's own flags
      args.push_back(flag + "=" + value);
    }
  }
  args.push_back("--benchmark_repetitions=" + repetitions);
  return exec_command("bench", args);
}

}  // namespace backplane::cli
