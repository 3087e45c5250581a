// Which backends a command loads: those --backends names, else $BACKPLANE_BACKENDS's,
// else every plugin found; then the --selection file, checked against what loaded.
#include "cli.h"

#include <backplane/selection_file.h>

#include <cstdlib>
#include <stdexcept>

namespace backplane::cli {

std::vector<BackendRecord> load_selected(const Options& options) {
  std::vector<std::string> names;
  if (options.backends) {
    names = *options.backends;
  } else if (const char* env = std::getenv("BACKPLANE_BACKENDS")) {
    try {
      names = backend_names_from_environment(env);  // the core's rule (loader.h), as Python's import reads it
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
