// Pieces shared by the `backplane` command's subcommands (commands/, one file each).
#pragma once

#include <backplane/loader.h>
#include <backplane/registry.h>

#include "util/strings.h"

#include <algorithm>
#include <filesystem>
#include <functional>
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
  std::optional<std::string> selection;              // --selection FILE (absolute), applied again once loaded
  bool strict = false;                               // --strict: refuse a --selection file naming an unloaded plugin
  std::vector<std::string> rest;                     // what the subcommand reads itself (run)
};

// Backend lists (--backends, BACKPLANE_BACKENDS) are read by the core's backend_names
// (loader.h), the one parser the bench and Python use too.

// Loads what the options name (throws BackendError), or every backend found when
// none is named (broken ones are recorded, never thrown), then applies --selection
// again (apply_selection_loaded). Returns the records selected.
std::vector<BackendRecord> load_selected(const Options& options);

// --selection's file, applied once more now that plugins are loaded: it is checked
// against them (a warning, or with --strict std::invalid_argument, for a bucket naming
// a plugin that is not loaded). Does nothing without --selection.
void apply_selection_loaded(const Options& options);

// The width of a table's OP column (ops, check): the longest op id plus two spaces.
inline int op_column_width(const std::vector<std::reference_wrapper<const OpDef>>& ops) {
  size_t longest = 14;
  for (const OpDef& op : ops) longest = std::max(longest, op.id().size());
  return static_cast<int>(longest + 2);
}

// The width of a table's BACKEND column (list, ops, check): at least 12, and the longest
// backend name plus two spaces, so a long name never runs into the next column.
inline int backend_column_width(const std::vector<BackendRecord>& records) {
  size_t longest = 10;
  for (const BackendRecord& r : records) longest = std::max(longest, r.name.size());
  return static_cast<int>(longest + 2);
}

using detail::join;  // util/strings.h

// One per file in commands/.
// The folder of the running command (nullopt where /proc/self/exe cannot be read).
std::optional<std::filesystem::path> command_dir();

// The common flags (--plugin-path, --prefer; --selection already) for the programs a
// command runs in its place, through the environment: the parser consumed them.
void pass_common_flags_on(const Options& options);

// One warning line on stderr for each of `selected` (the plugins the bench would time, as
// its manifests list them) whose manifest says it was built unoptimised
// (unoptimised_plugins.cpp); `backplane bench` calls it before it runs.
void warn_unoptimised_plugins(const std::vector<BackendRecord>& selected);

// Runs args[0] with args in place of this process; returns (exit code 1) only when it
// cannot, after saying why as "backplane <command>: cannot run ...".
int exec_command(const std::string& command, const std::vector<std::string>& args);
// Runs `python -m backplane <module_args...>` in place of this process (a checkout's
// python/, or a prefix install's lib/python, on PYTHONPATH). The interpreter:
// BACKPLANE_PYTHON, else the one the wheel is installed in, else the one this build was
// configured with, else python3 on PATH;
// needed_for names what asked for Python in the message when it cannot run.
int exec_python_side(const std::string& command, const std::vector<std::string>& module_args,
                     const std::string& needed_for);

int list_command(const Options& options);
int ops_command(const Options& options);
int check_command(const Options& options);
int run_command(const Options& options);
int new_backend_command(const Options& options);
int bench_command(const Options& options);
int tune_command(const Options& options);

}  // namespace backplane::cli
