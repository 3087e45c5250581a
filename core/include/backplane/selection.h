// Which plugin serves each op on each device, when more than one could.
//
// Plugins register their kernels with TORCH_LIBRARY_IMPL through the core's macros
// (kernel.h), so the core knows every (op, dispatch key, plugin) offer. One offer: the
// dispatcher calls that plugin's kernel directly. Two or more: the core installs one
// kernel for (op, key) that calls the chosen plugin's kernel (a boxed call, slower than
// a direct one: only for such ops; bench/results/), and the choice can change at
// any time, in a running process, under torch.compile too (compiled code calls the op
// through the dispatcher on every call).
//
// The rule: the first plugin in the op's preference list that offers a kernel for the
// key; else the selection file's plugin for the call's size (selection_file.h); else the
// first in the preference for "*" (every op); else the plugin loaded first.
// Preferences come from prefer() (C++), backplane.prefer() (Python, also a context
// manager), `--prefer` on the CLI, and BACKPLANE_PREFER, read when the core loads:
// "rms_norm:cuda_alt,cuda;*:cpu" (op:plugin[,plugin...], ';' between ops).
//
// Preferences are process-wide, and per op the newest still in force applies. prefer()
// sets one for good. A scope (ScopedPreference, Python's `with backplane.prefer(...)`)
// withdraws exactly its own when it ends, whatever the order scopes on several threads
// end in: the newest preference left for the op applies again. set_preferences()
// replaces every preference, those of open scopes too.
#pragma once

#include <backplane/export.h>
#include <backplane/selection_file.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace backplane {

// Sets the ordered preference for op ("*": every op without its own). An empty list
// clears it. Throws std::invalid_argument for an op the registry lacks or a bad name.
BACKPLANE_API void prefer(const std::string& op, const std::vector<std::string>& plugins);
// Parses and applies "op:a,b;op2:c" (the BACKPLANE_PREFER grammar). Throws
// std::invalid_argument naming the bad part.
BACKPLANE_API void prefer_from_string(const std::string& spec);
// Replaces every preference with those of spec ("" clears them all).
BACKPLANE_API void set_preferences(const std::string& spec);
// Every preference as "op:a,b;..." (the same grammar).
BACKPLANE_API std::string preferences_string();

// A preference that may yet be withdrawn: sets op's (as prefer() does; an empty list
// clears it) and returns its token. release_preference(token, true) withdraws it;
// (token, false) keeps it for good. For a binding that learns only later whether a call
// was a scope (Python's prefer()); a token already released or replaced is ignored.
BACKPLANE_API std::uint64_t hold_preference(const std::string& op, const std::vector<std::string>& plugins);
BACKPLANE_API void release_preference(std::uint64_t token, bool withdraw);

// Sets op's preference for a scope and withdraws exactly that one when it ends.
class BACKPLANE_API ScopedPreference {
 public:
  ScopedPreference(const std::string& op, const std::vector<std::string>& plugins);
  ~ScopedPreference();
  ScopedPreference(const ScopedPreference&) = delete;
  ScopedPreference& operator=(const ScopedPreference&) = delete;

 private:
  std::uint64_t token_;
};

struct ServingRecord {
  std::string op;
  std::string dispatch_key;              // "CPU"
  std::vector<std::string> offered_by;   // plugins with a kernel for it, in load order
  std::string serving;                   // the plugin the dispatcher reaches now
  std::string why;                       // "only offer", "preferred for add", "loaded first",
                                         // "selection file F, bucket 1 (0 to 65536 elements): cpu_alt; ..."
  std::vector<SizeBucket> buckets;       // a selection file's split by size (serving: "cpu_alt<=65536,cpu");
                                         // empty when one plugin serves every size
};

// Every (op, key) some loaded plugin serves. A record with more than one offer is a
// conflict, resolved by the rule above; `why` says how.
BACKPLANE_API std::vector<ServingRecord> serving();
// The plugin serving op on dispatch_key now; empty when none does.
BACKPLANE_API std::string serving_plugin(const std::string& op, const std::string& dispatch_key);

}  // namespace backplane
