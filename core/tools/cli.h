// Pieces shared by the `backplane` command's subcommands.
#pragma once

#include <backplane/loader.h>
#include <backplane/registry.h>

#include <optional>
#include <string>
#include <vector>

namespace backplane::cli {

// Exit codes, as `backplane --help` documents them.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // a check, a run or a named backend failed
inline constexpr int kExitUsage = 2;   // bad command line

struct Options {
  std::optional<std::vector<std::string>> backends;  // --backends a,b (unset: BACKPLANE_BACKENDS, else all found)
  LoadOptions load;                                  // --plugin-dir DIR
  std::vector<std::string> ops;                      // --ops a,b: only these (check)
  bool json = false;                                 // --json: machine-readable output on stdout
  bool verbose = false;                              // -v: every failure in full
  std::vector<std::string> rest;                     // what the subcommand reads itself (run)
};

// Loads what the options name (throws BackendError), or every backend found when
// none is named (broken ones are recorded, never thrown). Returns the records selected.
std::vector<BackendRecord> load_selected(const Options& options);

// The width of a table's OP column: wide enough for the longest op id plus a space.
int op_column_width(const std::vector<std::reference_wrapper<const OpDef>>& ops);

int check_command(const Options& options);
int run_command(const Options& options);
int new_backend_command(const Options& options);
int bench_command(const Options& options);

}  // namespace backplane::cli
