// A selection file: which plugin serves an op on a dispatch key, by the size of the
// call. `backplane tune` writes one from measurements; a deployer applies it with
// backplane.load(..., selection=FILE), BACKPLANE_SELECTION=FILE or `--selection FILE`.
//
//   backplane_selection: 1
//   made_by: {...}                 # free-form: the command, machine and torch that measured it
//   ops:
//     - op: mul                    # a registry op, or a plugin's own (acme::fused_gelu)
//       dispatch_key: CPU          # CPU, CUDA, PrivateUse1 (as `backplane ops` shows them)
//       buckets:                   # ascending; a call takes the first whose up_to it fits
//         - {up_to: 65536, plugin: cpu_alt, measured: ...}
//         - {plugin: cpu, measured: ...}   # the last has no up_to: every larger call
//
// A call's size is the element count of its largest Tensor argument: one read of the
// arguments already on the dispatcher's stack, at every call (selection.h). The file
// is the same on every rank of a job that loads it, so every rank makes the same choice
// for the same call; `measured` and `made_by` are kept for people, never read.
//
// Where it applies: an (op, key) that two loaded plugins offer. A preference for the op
// itself (prefer("mul", ...), BACKPLANE_PREFER=mul:...) overrides the file; a preference
// for every op ("*") does not. A bucket whose plugin does not offer the op here falls back
// to the rule without the file, and serving() says so.
#pragma once

#include <backplane/export.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace backplane {

struct SizeBucket {
  std::int64_t up_to = std::numeric_limits<std::int64_t>::max();  // elements of the largest Tensor argument
  std::string plugin;
};

struct SelectionRule {
  std::string op;            // its id: "mul", "acme::fused_gelu"
  std::string dispatch_key;  // "CPU"
  std::vector<SizeBucket> buckets;
};

// Parses a selection file. Throws std::invalid_argument "PATH:LINE:COLUMN: what was
// expected, what was found" for a file that is not one, "PATH: cannot read the selection
// file: why" for one that cannot be read: only a regular file of at most 16 MiB is read,
// opened without blocking (a FIFO or a device is refused, never waited on).
BACKPLANE_API std::vector<SelectionRule> read_selection_file(const std::string& path);

// Reads and applies a selection file, replacing the one in force (the choice changes at
// once, in compiled code too). Throws as read_selection_file; the one in force then stays.
// A bucket naming a plugin that is not loaded (a misspelling, or a plugin this machine
// lacks) is a warning naming every such bucket and the plugins loaded; with strict, it
// is refused (std::invalid_argument, nothing applied). Checked against the plugins
// loaded when it is applied: with none loaded yet, only strict refuses.
BACKPLANE_API void apply_selection_file(const std::string& path, bool strict = false);
// No selection file in force from now on.
BACKPLANE_API void clear_selection_file();
// The path of the selection file in force; empty when none.
BACKPLANE_API std::string selection_file();

}  // namespace backplane
