#include "bench_options.h"

#include <backplane/loader.h>
#include <backplane/registry.h>

#include "util/strings.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

namespace backplane::bench {
namespace {

std::vector<std::string> split(const std::string& list) { return detail::split_nonempty(list, ','); }
using detail::join;

// --backends's names, else BACKPLANE_BACKENDS's (unset or empty: cpu), by the rule the
// `backplane` command reads them by (backend_names, loader.h). "none" loads no backend,
// which leaves the benchmark nothing to run: refused as a usage error.
std::vector<std::string> backend_list(const std::optional<std::string>& flag) {
  const char* env = std::getenv("BACKPLANE_BACKENDS");
  std::vector<std::string> names;
  std::string what;
  if (flag) {
    what = "--backends '" + *flag + "'";
    names = backend_names(*flag, what);
  } else if (env && *env) {
    what = "BACKPLANE_BACKENDS='" + std::string(env) + "'";
    names = backend_names(env, what, "; unset it to benchmark cpu");
  } else {
    return {"cpu"};
  }
  if (names == std::vector<std::string>{"none"})
    throw std::invalid_argument(what + ": 'none' loads no backend, which leaves nothing to benchmark");
  return names;
}

double parse_seconds(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  const bool number = !text.empty() && (*end == '\0' || std::string(end) == "s");
  if (!number || !std::isfinite(seconds) || !(seconds > 0) || seconds > kMaxMinTime)
    throw std::invalid_argument(flag + ": expected seconds > 0 and at most " + std::to_string(int(kMaxMinTime)) +
                                " such as 0.05, found '" + text + "'");
  return seconds;
}

// Google Benchmark's own flags that it would take badly: kept in argv for it to parse.
void check_benchmark_flag(const std::string& arg, BenchOptions& options) {
  const auto value_of = [&](const std::string& flag) -> const char* {
    return arg.rfind(flag + "=", 0) == 0 ? arg.c_str() + flag.size() + 1 : nullptr;
  };
  if (const char* text = value_of("--benchmark_repetitions")) {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(text, &end, 10);
    if (!*text || *end || errno || n < 1 || n > kMaxRepetitions)
      throw std::invalid_argument("--benchmark_repetitions: expected a whole number from 1 to " +
                                  std::to_string(kMaxRepetitions) + ", found '" + text + "'");
  } else if (const char* file = value_of("--benchmark_out")) {
    options.out_file = file;
  } else if (const char* format = value_of("--benchmark_out_format")) {
    options.out_json = std::string(format) == "json";
  }
}

}  // namespace

BenchOptions take_bench_options(int* argc, char** argv) {
  std::map<std::string, std::optional<std::string>> values = {
      {"--backends", std::nullopt}, {"--ops", std::nullopt}, {"--dtypes", std::nullopt}, {"--shapes", std::nullopt},
      {"--min-time", std::nullopt}, {"--max-time", std::nullopt}};
  BenchOptions options;
  // The flags without a value.
  const std::map<std::string, bool*> switches = {
      {"--cuda-graph", &options.cuda_graph}, {"--backward", &options.backward}, {"--cold-l2", &options.cold_l2}};
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    if (const auto it = switches.find(arg); it != switches.end()) {
      *it->second = true;
      continue;
    }
    if (const auto eq = arg.find('='); eq != std::string::npos && switches.count(arg.substr(0, eq)))
      throw std::invalid_argument(arg.substr(0, eq) + ": expected no value (the flag alone), found '" + arg + "'");
    bool taken = false;
    for (auto& [flag, value] : values) {
      if (arg.rfind(flag + "=", 0) == 0) {
        value = arg.substr(flag.size() + 1);
        taken = true;
      } else if (arg == flag) {
        if (i + 1 >= *argc) throw std::invalid_argument(flag + " needs a value, e.g. " + flag + "=a,b");
        value = argv[++i];
        taken = true;
      }
    }
    if (taken) continue;
    check_benchmark_flag(arg, options);
    argv[kept++] = argv[i];
  }
  *argc = kept;
  argv[kept] = nullptr;

  options.backends = backend_list(values["--backends"]);

  for (const auto& op : split(values["--ops"].value_or(""))) options.ops.insert(op);
  for (const auto& shape : split(values["--shapes"].value_or(""))) options.shapes.insert(shape);
  options.all_shapes = options.shapes.erase("all") > 0;
  const std::string dtypes = values["--dtypes"].value_or("float32,bfloat16");
  for (const auto& name : split(dtypes)) {
    auto it = dtype_names().find(name);  // the registry's dtype names
    if (it == dtype_names().end() || !c10::isFloatingType(it->second))
      throw std::invalid_argument("--dtypes: '" + name + "' is not one of the floating dtypes the bench draws inputs "
                                  "for; expected float32, float64, float16 or bfloat16");
    options.dtypes.push_back(it->second);
  }
  if (options.dtypes.empty()) throw std::invalid_argument("--dtypes names no dtype");
  if (values["--min-time"]) options.stop.min_seconds = parse_seconds("--min-time", *values["--min-time"]);
  if (values["--max-time"]) options.stop.max_seconds = parse_seconds("--max-time", *values["--max-time"]);
  else options.stop.max_seconds = std::max(options.stop.max_seconds, options.stop.min_seconds);
  if (options.stop.max_seconds < options.stop.min_seconds)
    throw std::invalid_argument("--max-time: expected at least --min-time (" +
                                values["--min-time"].value_or("0.05") + " s), found '" + *values["--max-time"] + "'");
  return options;
}

void check_names(const BenchOptions& options) {
  std::set<std::string> known_ops, known_shapes;
  for (const OpDef& op : all_ops()) {
    known_ops.insert(op.id());
    for (const auto& shape : op.checks.bench) known_shapes.insert(shape.name);
  }
  for (const auto& op : options.ops)
    if (!known_ops.count(op))
      throw std::invalid_argument("--ops: no op '" + op + "' in the registry or a loaded plugin's fragment; known: " +
                                  join(known_ops));
  for (const auto& shape : options.shapes)
    if (!known_shapes.count(shape))
      throw std::invalid_argument("--shapes: no op has a bench preset named '" + shape + "'; presets: " +
                                  join(known_shapes) + " (or all)");
}

}  // namespace backplane::bench
