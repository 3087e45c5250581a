// The `backplane` command: list backends, show op coverage, run the conformance
// suite. Exit status: 0 success, 1 a backend or a check failed, 2 usage.
#include "cli.h"

#include <backplane/coverage.h>
#include <c10/util/Exception.h>
#include <backplane/plugin_abi.h>
#include <backplane/registry.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace backplane::cli {
namespace {

constexpr const char* kUsage = R"(usage: backplane <command> [--backends a,b] [--plugin-dir DIR]

commands:
  list    every backend on the search path, each loaded if it can be: status, dispatch key,
          version, ops, and the path or the reason it failed
  ops     the coverage table: each registry op on each backend, with its dtypes
  check   the conformance suite (every op against PyTorch) on each loaded backend
  run     MODEL.pt2 --input MODEL.io.pt [--repeat N]: run an AOTInductor package with no
          Python, check it against the reference saved at export, report latency

--backends a,b    load exactly these (default: $BACKPLANE_BACKENDS, else every backend found;
                  "none" loads none)
--plugin-dir DIR  search DIR before $BACKPLANE_PLUGIN_PATH and the build directory
)";

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

int list_command(const Options& options) {
  const auto records = load_selected(options);
  std::cout << "backplane " << core_version() << ", torch " << torch_major_minor() << ", plugin ABI " << kPluginAbi
            << "\nsearch path: " << join(plugin_search_path(options.load), ":") << "\n\n";
  std::cout << std::left << std::setw(10) << "BACKEND" << std::setw(11) << "STATUS" << std::setw(13) << "KEY"
            << std::setw(9) << "VERSION" << std::setw(5) << "OPS" << "PATH / REASON\n";
  for (const auto& r : records) {
    std::cout << std::left << std::setw(10) << r.name << std::setw(11) << to_string(r.status) << std::setw(13)
              << (r.dispatch_key.empty() ? "-" : r.dispatch_key) << std::setw(9)
              << (r.version.empty() ? "-" : r.version) << std::setw(5) << r.ops.size() << r.path << "\n";
    if (!r.reason.empty()) std::cout << std::string(48, ' ') << "reason: " << r.reason << "\n";
  }
  if (records.empty()) std::cout << "(no plugins found)\n";
  return 0;
}

int ops_command(const Options& options) {
  const auto records = load_selected(options);
  std::cout << std::left << std::setw(16) << "OP";
  for (const auto& r : records) std::cout << std::setw(12) << (r.name + (r.status == BackendStatus::Loaded ? "" : "*"));
  std::cout << "DTYPES\n";
  for (const auto& row : coverage(records)) {
    std::cout << std::left << std::setw(16) << row.op;
    std::vector<std::string> dtypes;
    for (const auto& cell : row.backends) {
      std::cout << std::setw(12) << (cell.implemented ? "yes" : "MISSING");
      if (cell.implemented) dtypes = cell.dtypes;
    }
    std::vector<std::string> declared;
    for (auto d : registry().find(row.op)->dtypes) declared.push_back(dtype_name(d));
    std::cout << join(declared, ",") << "\n";
  }
  bool any_not_loaded = false;
  for (const auto& r : records) any_not_loaded |= r.status != BackendStatus::Loaded;
  if (any_not_loaded) std::cout << "* not loaded: coverage as its manifest declares\n";
  return 0;
}

}  // namespace

std::vector<BackendRecord> load_selected(const Options& options) {
  std::vector<std::string> names = options.backends;
  if (names.empty())
    if (const char* env = std::getenv("BACKPLANE_BACKENDS")) names = split(env);
  if (names.empty()) return load_discovered(options.load);
  if (names == std::vector<std::string>{"none"}) return backends(options.load);  // load nothing
  load(names, options.load);
  std::vector<BackendRecord> selected;
  for (auto& r : backends(options.load))
    for (const auto& n : names)
      if (r.name == n) selected.push_back(r);
  return selected;
}

}  // namespace backplane::cli

int main(int argc, char** argv) {
  using namespace backplane::cli;
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  Options options;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--backends" || arg == "--plugin-dir") && i + 1 >= argc) {
      std::cerr << "backplane: " << arg << " needs a value\n" << kUsage;
      return 2;
    }
    if (arg == "--backends")
      options.backends = split(argv[++i]);
    else if (arg == "--plugin-dir")
      options.load.dir = argv[++i];
    else
      options.rest.push_back(arg);
  }
  try {
    if (command == "list") return list_command(options);
    if (command == "ops") return ops_command(options);
    if (command == "check") return check_command(options);
    if (command == "run") return run_command(options);
    if (command == "-h" || command == "--help" || command == "help") {
      std::cout << kUsage;
      return 0;
    }
    std::cerr << "backplane: unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const backplane::BackendError& e) {
    std::cerr << "backplane: " << e.what() << "\n";
    return 1;
  } catch (const c10::Error& e) {  // a bad package or input file, as torch reports it
    std::cerr << "backplane " << command << ": " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "backplane " << command << ": " << e.what() << "\n";
    return 1;
  }
}
