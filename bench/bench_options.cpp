#include "bench_options.h"

#include <backplane/registry.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>

namespace backplane::bench {
namespace {

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) names.push_back(name);
  return names;
}

std::string join(const std::set<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

BenchOptions take_bench_options(int* argc, char** argv) {
  std::map<std::string, std::optional<std::string>> values = {
      {"--backends", std::nullopt}, {"--ops", std::nullopt}, {"--dtypes", std::nullopt}, {"--shapes", std::nullopt},
      {"--min-time", std::nullopt}};
  BenchOptions options;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cuda-graph") {  // the one flag without a value
      options.cuda_graph = true;
      continue;
    }
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
    if (!taken) argv[kept++] = argv[i];
  }
  *argc = kept;
  argv[kept] = nullptr;

  std::string backends = values["--backends"].value_or("");
  if (!values["--backends"]) {
    const char* env = std::getenv("BACKPLANE_BACKENDS");
    backends = (env && *env) ? env : "cpu";
  }
  options.backends = split(backends);
  if (options.backends.empty()) throw std::invalid_argument("--backends names no backend");

  for (const auto& op : split(values["--ops"].value_or(""))) options.ops.insert(op);
  for (const auto& shape : split(values["--shapes"].value_or(""))) options.shapes.insert(shape);
  const std::string dtypes = values["--dtypes"].value_or("float32,bfloat16");
  for (const auto& name : split(dtypes)) {
    auto it = dtype_names().find(name);  // the registry's dtype names
    if (it == dtype_names().end() || !c10::isFloatingType(it->second))
      throw std::invalid_argument("--dtypes: '" + name + "' is not one of the floating dtypes the bench draws inputs "
                                  "for; expected float32, float64, float16 or bfloat16");
    options.dtypes.push_back(it->second);
  }
  if (options.dtypes.empty()) throw std::invalid_argument("--dtypes names no dtype");
  if (values["--min-time"]) {
    const std::string& text = *values["--min-time"];
    char* end = nullptr;
    options.min_time = std::strtod(text.c_str(), &end);
    if (text.empty() || (*end != '\0' && std::string(end) != "s") || !(options.min_time > 0))
      throw std::invalid_argument("--min-time: expected seconds > 0 such as 0.05, found '" + text + "'");
  }
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
                                  join(known_shapes));
}

}  // namespace backplane::bench
