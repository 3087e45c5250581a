// Which backends a command loads: those --backends names, else $BACKPLANE_BACKENDS's,
// else every plugin found; then the --selection file, checked against what loaded.
#include "cli.h"

#include <backplane/selection_file.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace backplane::cli {

std::vector<std::string> backend_names(const std::string& value, const std::string& what, const std::string& unset) {
  std::vector<std::string> names;
  std::string::size_type start = 0;
  for (auto end = value.find(','); start != std::string::npos; end = value.find(',', start)) {
    const std::string item = value.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    names.push_back(b == std::string::npos ? "" : item.substr(b, e - b + 1));
    start = end == std::string::npos ? end : end + 1;
  }
  const std::string expected = "expected backend names separated by ',' ('none' loads none" + unset + ")";
  if (std::all_of(names.begin(), names.end(), [](const std::string& n) { return n.empty(); }))
    throw std::invalid_argument(what + " names no backend: " + expected);
  if (std::count(names.begin(), names.end(), ""))
    throw std::invalid_argument(what + " has an empty entry: " + expected);
  if (names.size() > 1 && std::count(names.begin(), names.end(), "none"))
    throw std::invalid_argument(what + ": 'none' loads no backend, so it stands alone");
  return names;
}

std::vector<BackendRecord> load_selected(const Options& options) {
  std::vector<std::string> names;
  if (options.backends) {
    names = *options.backends;
  } else if (const char* env = std::getenv("BACKPLANE_BACKENDS")) {
    try {
      names = backend_names(env, "BACKPLANE_BACKENDS='" + std::string(env) + "'", "; unset it to load every plugin found");
    } catch (const std::invalid_argument& e) {
      throw BackendError(e.what());
    }
  }
  std::vector<BackendRecord> selected;
  if (names.empty()) {
    selected = load_discovered(options.load);
  } else if (names != std::vector<std::string>{"none"}) {
    load(names, options.load);
    for (auto& r : backends(options.load))
      for (const auto& n : names)
        if (r.name == n) selected.push_back(r);
  }
  apply_selection_loaded(options);
  return selected;
}

void apply_selection_loaded(const Options& options) {
  if (options.selection) apply_selection_file(*options.selection, options.strict);
}

}  // namespace backplane::cli
