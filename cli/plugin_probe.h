// Opening an untrusted plugin in a child process first (`backplane list`): a plugin whose
// static initializer crashes, aborts, hangs or ends the process is reported as failed,
// with its signal or exit status, and discovery goes on with the others. The child is
// this program again, running the hidden `backplane __probe NAME [DIRS]`.
#pragma once

#include <backplane/loader.h>

#include <optional>
#include <string>

namespace backplane::cli {

// nullopt when the child loaded `name`; otherwise why not: the loader's reason, or the
// child's signal or exit status. A child still opening after BACKPLANE_PROBE_TIMEOUT
// seconds (a whole number from 1 to 3600; otherwise 60) is killed.
std::optional<std::string> probe_in_child(const std::string& name, const LoadOptions& options);

// The hidden `backplane __probe_in_child NAME DIRS`: probe_in_child's verdict for another
// program (Python's implicit loads, python/backplane_plugins.py), so that the child, its
// timeout and the reading of its end have this file as their one owner. Prints one line,
// "backplane-probe: passed" or "backplane-probe: failed: WHY"; returns the exit status, 0.
int probe_verdict_command(const std::string& name, const std::string& dirs);

// The child's side: loads NAME from DIRS and says whether it loaded. Never returns normally.
[[noreturn]] void probe_command(const std::string& name, const std::string& dirs);

}  // namespace backplane::cli
