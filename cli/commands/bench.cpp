// `backplane bench`: the benchmark engine (backplane_bench, Google Benchmark, beside this
// command) with the selection flags translated; comparisons and plots are done by the
// Python side (`python -m backplane bench`, backplane/bench.py), which this command runs
// for --compare, --compare-backends, --plot and --side-by-side.
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

fs::path own_dir() { return command_dir().value_or("."); }

// what: said after the program's name when it cannot be run.
int exec(const std::vector<std::string>& args, const std::string& what = "") {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::cerr << "backplane bench: cannot run " << args[0] << what << ": " << std::strerror(errno) << "\n";
  return kExitFailed;
}

// Google Benchmark aborts on a negative count and runs no row at 0; the engine checks
// again (bench_options.h), this names the flag as the user wrote it.
constexpr long kMaxRepetitions = 1000;

bool valid_repetitions(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(text.c_str(), &end, 10);
  return !text.empty() && !*end && !errno && n >= 1 && n <= kMaxRepetitions;
}

// The interpreter of the Python installation whose site-packages holds this command's
// package (the wheel: <site>/backplane/bin/backplane), by the POSIX layout
// <prefix>/lib/pythonX.Y/site-packages with <prefix>/bin/pythonX.Y; empty elsewhere.
std::string python_beside_package() {
  std::error_code ec;
  const fs::path package = fs::weakly_canonical(own_dir() / "..", ec);
  if (ec || !fs::is_regular_file(package / "__init__.py", ec)) return "";
  const fs::path version_dir = package.parent_path().parent_path();  // lib/pythonX.Y
  const fs::path python = version_dir.parent_path().parent_path() / "bin" / version_dir.filename();
  return fs::is_regular_file(python, ec) ? python.string() : "";
}

// The interpreter for the Python side and why it was chosen: BACKPLANE_PYTHON, else the
// one the wheel is installed in, else the one this build was configured with
// (BACKPLANE_BUILD_PYTHON: its torch is the one these libraries were built against), else
// python3 on PATH.
std::pair<std::string, std::string> python_interpreter() {
  const char* python = std::getenv("BACKPLANE_PYTHON");
  if (python && *python) return {python, "BACKPLANE_PYTHON"};
  const std::string installed = python_beside_package();
  if (!installed.empty()) return {installed, "the Python the backplane package is installed in"};
  std::error_code ec;
  if (fs::is_regular_file(BACKPLANE_BUILD_PYTHON, ec)) return {BACKPLANE_BUILD_PYTHON, "the Python of this build"};
  return {"python3", std::string("python3 on PATH: BACKPLANE_PYTHON is unset and the build's Python, ") +
                         BACKPLANE_BUILD_PYTHON + ", is not a file"};
}

}  // namespace

int bench_command(const Options& options) {
  std::string backends;
  if (options.backends)
    for (const auto& b : *options.backends) backends += (backends.empty() ? "" : ",") + b;
  std::string ops;  // validated against the registry by the command line parser
  for (const auto& op : options.ops) ops += (ops.empty() ? "" : ",") + op;
  // The common flags reach the engine or the Python side through the environment
  // (the command line parser consumed them; this process is replaced by exec).
  if (options.load.dir) {
    const char* old = std::getenv("BACKPLANE_PLUGIN_PATH");
    const std::string path = *options.load.dir + (old && *old ? ":" + std::string(old) : "");
    setenv("BACKPLANE_PLUGIN_PATH", path.c_str(), 1);
  }
  const std::string prefer = preferences_string();
  if (!prefer.empty()) setenv("BACKPLANE_PREFER", prefer.c_str(), 1);
  bool python_side = false;
  for (const auto& arg : options.rest)
    if (arg == "--compare" || arg == "--compare-backends" || arg == "--plot" || arg == "--side-by-side") python_side = true;

  if (python_side) {
    // The Python side runs the engine too. In a source checkout, its package is python/.
    const fs::path checkout_python = own_dir() / ".." / ".." / "python";
    if (fs::is_directory(checkout_python / "backplane")) {
      const char* old = std::getenv("PYTHONPATH");
      const std::string path = fs::canonical(checkout_python).string() + (old && *old ? ":" + std::string(old) : "");
      setenv("PYTHONPATH", path.c_str(), 1);
    }
    const auto [python, chosen_by] = python_interpreter();
    std::vector<std::string> args = {python, "-m", "backplane", "bench"};
    if (!backends.empty()) args.insert(args.end(), {"--backends", backends});
    if (!ops.empty()) args.insert(args.end(), {"--ops", ops});
    args.insert(args.end(), options.rest.begin(), options.rest.end());
    return exec(args, " (the Python for --compare/--plot/--side-by-side, chosen as " + chosen_by +
                          "; set BACKPLANE_PYTHON to a Python with torch)");
  }

  const fs::path engine = own_dir() / "backplane_bench";
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
    if (flag == "--interleave") {  // the engine's flags without a value
      args.push_back("--benchmark_enable_random_interleaving=true");
      continue;
    }
    if (flag == "--cuda-graph") {
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
    } else if (flag == "--threshold") {
      continue;  // only meaningful with --compare (the Python side)
    } else {  // --ops, --dtypes, --shapes: the engine's own flags
      args.push_back(flag + "=" + value);
    }
  }
  args.push_back("--benchmark_repetitions=" + repetitions);
  return exec(args);
}

}  // namespace backplane::cli
