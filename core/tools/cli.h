// Pieces shared by the `backplane` command's subcommands.
#pragma once

#include <backplane/loader.h>

#include <string>
#include <vector>

namespace backplane::cli {

struct Options {
  std::vector<std::string> backends;  // --backends a,b (empty: BACKPLANE_BACKENDS, else all found)
  LoadOptions load;                   // --plugin-dir
  std::vector<std::string> rest;      // arguments the subcommand reads itself
};

// Loads what the options name (throws BackendError), or every backend found when
// none is named (broken ones are recorded, never thrown). Returns backends().
std::vector<BackendRecord> load_selected(const Options& options);

int check_command(const Options& options);
int run_command(const Options& options);

}  // namespace backplane::cli
