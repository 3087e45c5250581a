// A selection file: which plugin serves an op on a dispatch key, by the size of the
// call. `backplane tune` writes one from measurements; a deployer applies it with
// backplane.load(..., selection=FILE), BACKPLANE_SELECTION=FILE or `--selection FILE`.
//
//   backplane_selection: 1
//   made_by: {...}                 # free-form: the command, machine and torch that measured it
//   environment:                   # optional: where it was measured (checked on apply, below)
//     torch: 2.11.0+cu130
//     devices: [{type: cuda, name: NVIDIA H200, capability: "9.0", driver: 580.159.04}]
//     plugins: [{name: cuda, version: 0.1.0, sha256: HEX}]
//   ops:
//     - op: mul                    # a registry op, or a plugin's own (acme::fused_gelu)
//       dispatch_key: CPU          # CPU, CUDA, PrivateUse1 (as `backplane ops` shows them)
//       dtype: bfloat16            # optional: calls in this dtype; without: every dtype no entry names
//       mode: compile              # optional, for people: the mode tune measured in
//       buckets:                   # ascending; a call takes the first whose up_to it fits
//         - {up_to: 65536, plugin: cpu_alt, measured: ...}
//         - {plugin: cpu, measured: ...}   # the last has no up_to: every larger call
//
// `inductor` (kInductor) is a bucket name of its own: Inductor's code for the op's registry
// `reference:`, traced into compiled graphs (python/backplane/compile/) so that it fuses with
// its neighbours. It exists under torch.compile and in AOTInductor packages only; an eager
// call of such a size is served by the plugin the rule without the file picks. Only an op
// with a `reference:` that returns new tensors may name it.
//
// The environment, where the file has one, is compared with this process's as it is
// applied: torch's version, each device named (type, name, capability, driver; only those
// the caller describes: Python describes its CUDA devices, the C++ runner none) and each
// plugin named (version, the sha256 of its file, for plugins loaded). What differs is one
// warning per apply, naming each difference; strict refuses the file instead.
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

// The bucket name for Inductor's code of the op's reference (see above).
inline constexpr const char* kInductor = "inductor";

struct SizeBucket {
  std::int64_t up_to = std::numeric_limits<std::int64_t>::max();  // elements of the largest Tensor argument
  std::string plugin;  // a plugin's name, or kInductor
  std::string dtype;   // in serving(): the calls of this dtype ("float32"); empty: every dtype not named
};

struct SelectionRule {
  std::string op;            // its id: "mul", "acme::fused_gelu"
  std::string dispatch_key;  // "CPU"
  std::string dtype;         // "bfloat16": calls in this dtype only; empty: every dtype no rule names
  std::string mode;          // eager, graph or compile: how it was measured (for people)
  std::vector<SizeBucket> buckets;
};

// What a selection file says of where it was measured (`environment:`); empty fields
// were not recorded and are not compared.
struct SelectionDevice {
  std::string type, name, capability, driver;  // "cuda", "NVIDIA H200", "9.0", "580.159.04"
};
struct SelectionPlugin {
  std::string name, version, sha256;
};
struct SelectionEnvironment {
  std::string torch;
  std::vector<SelectionDevice> devices;
  std::vector<SelectionPlugin> plugins;
};

struct SelectionFile {
  std::vector<SelectionRule> rules;
  SelectionEnvironment environment;
};

// Parses a selection file. Throws std::invalid_argument "PATH:LINE:COLUMN: what was
// expected, what was found" for a file that is not one, "PATH: cannot read the selection
// file: why" for one that cannot be read: only a regular file of at most 16 MiB is read,
// opened without blocking (a FIFO or a device is refused, never waited on).
BACKPLANE_API std::vector<SelectionRule> read_selection_file(const std::string& path);
// The same, with the file's environment.
BACKPLANE_API SelectionFile read_selection(const std::string& path);

// Reads and applies a selection file, replacing the one in force (the choice of plugin
// changes at once, in compiled code too; an `inductor` bucket is resolved while compiling,
// so code compiled before keeps its choice until it recompiles). Throws as read_selection_file; the one in force then stays.
// A bucket naming a plugin that is not loaded (a misspelling, or a plugin this machine
// lacks) is a warning naming every such bucket and the plugins loaded; with strict, it
// is refused (std::invalid_argument, nothing applied). Checked against the plugins
// loaded when it is applied: with none loaded yet, only strict refuses.
BACKPLANE_API void apply_selection_file(const std::string& path, bool strict = false);
// The same, comparing the file's environment with this one: `torch_here` (torch.__version__
// as Python sees it; empty: the version this core was built against) and the devices the
// caller describes (none: devices are not compared).
BACKPLANE_API void apply_selection_file(const std::string& path, bool strict, const std::string& torch_here,
                                        const std::vector<SelectionDevice>& devices_here);
// The rules of the file in force, as read (dtype keys and kInductor buckets included): for
// the compile-time pass, which resolves kInductor buckets while tracing.
BACKPLANE_API std::vector<SelectionRule> selection_rules();
// No selection file in force from now on.
BACKPLANE_API void clear_selection_file();
// The path of the selection file in force; empty when none.
BACKPLANE_API std::string selection_file();

}  // namespace backplane
