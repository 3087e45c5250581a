// The plugin loader: backend name -> file on the search path -> manifest check ->
// dlopen -> record. Thread-safe (one mutex), idempotent (a backend loads once), and
// plugins are never closed (the dispatcher keeps pointers into them).
#pragma once

#include <backplane/export.h>

#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace backplane {

enum class BackendStatus {
  Loaded,     // opened; its kernels are registered
  Available,  // found on the search path, manifest compatible, not opened
  Rejected,   // found, but its manifest says it cannot work here; never opened
  Failed,     // opening it failed (dlerror says why)
  // Found and compatible, but what its kernels need is missing here (kind triton: the
  // triton module, a device Triton targets for its key, or Python itself in the C++
  // command); never opened, and a later load tries again.
  Unavailable,
};
BACKPLANE_API const char* to_string(BackendStatus status);

struct BackendRecord {
  std::string name;
  BackendStatus status = BackendStatus::Available;
  std::string reason;  // why rejected or failed; empty otherwise
  std::string path;    // the plugin file
  std::string version;
  std::string dispatch_key;
  std::vector<std::string> ops;  // ops with a kernel (loaded: as registered; otherwise: as the manifest says)
  // The plugin's Python side, from its manifest (empty when it has none): the module to
  // import and the directory to find it in.
  std::string python_module;
  std::string python_path;
  std::string registry;  // its registry fragment of own ops (vendor_ops.h); empty when none
  // "full" or "stable" (manifest.h): built for this torch only, or on the stable ABI for
  // torch_target and later.
  std::string torch_abi = "full";
  std::string torch_target;  // the torch it was built for ("2.14"), or, stable, the oldest it runs under
  // "shared_library", or "triton": no library (path is its manifest); its kernels are
  // Python launchers from python_module, and torch_target and triton_versions are the
  // version ranges its manifest supports. Loaded under TRITON_INTERPRET=1, it serves CPU
  // and reason says so.
  std::string kind = "shared_library";
  std::string triton_versions;
};

// A backend that was named and could not be loaded. what() says what was tried and why.
class BACKPLANE_API BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LoadOptions {
  // More directories (a colon list), searched after the installed plugins and before
  // BACKPLANE_PLUGIN_PATH.
  std::optional<std::string> dir;
};

// Loads one backend, or returns its record if it is loaded already. Throws BackendError.
BACKPLANE_API BackendRecord load(const std::string& name, const LoadOptions& options = {});
// Loads each in order; stops at the first failure (throws BackendError).
BACKPLANE_API std::vector<BackendRecord> load(const std::vector<std::string>& names, const LoadOptions& options = {});
// load({"cpu", "cuda"}): a braced list picks this overload (a one-name list would
// otherwise be ambiguous between a string and a vector).
BACKPLANE_API std::vector<BackendRecord> load(std::initializer_list<std::string> names, const LoadOptions& options = {});

// Tries every plugin on the search path; a broken one is recorded as rejected or
// failed and never stops the others. Returns backends().
BACKPLANE_API std::vector<BackendRecord> load_discovered(const LoadOptions& options = {});

// Every backend this process knows: loaded, failed and rejected ones, and the
// plugins found on the search path (available or rejected). Sorted by name.
BACKPLANE_API std::vector<BackendRecord> backends(const LoadOptions& options = {});

// The directories searched, in order: the directory holding libbackplane_core.so (the
// installed plugins), options.dir, then BACKPLANE_PLUGIN_PATH (colon lists). The first
// directory holding a name wins, so an added directory never replaces an installed plugin.
BACKPLANE_API std::vector<std::string> plugin_search_path(const LoadOptions& options = {});

// Whether name is a plain identifier ([A-Za-z_][A-Za-z0-9_]*) naming no reserved
// library. Names with '/' or '..' are refused.
BACKPLANE_API bool is_valid_backend_name(const std::string& name);

// A backend list as --backends or BACKPLANE_BACKENDS gives it: names separated by ','
// ("cpu,cuda"), each trimmed of spaces and tabs; "none" alone is {"none"}, loading none.
// The names themselves are checked by load(). Throws std::invalid_argument for a list
// naming nothing, an empty entry ("cpu,,cuda") or "none" beside names; the message
// starts with `what` ("--backends 'v'") and ends its hint with `unset` ("" or, say,
// "; unset it to load every plugin found"). The one parser of such lists: the CLI, the
// bench and Python (through the C interface) all read them here.
BACKPLANE_API std::vector<std::string> backend_names(const std::string& value, const std::string& what,
                                                     const std::string& unset = "");
// backend_names for BACKPLANE_BACKENDS's value, with the variable's message (unset, every
// plugin found loads): what the `backplane` command and `import backplane` read.
BACKPLANE_API std::vector<std::string> backend_names_from_environment(const std::string& value);

namespace detail {
// Calls an opened stable-ABI plugin's backplane_stable_plugin_init with the core's
// interface (stable_api.h): its kernels register through the core. The loader does it
// while the plugin counts as loading; the manifest tool, to learn its ops. Why it
// failed, or nullopt.
BACKPLANE_API std::optional<std::string> init_stable_plugin(void* handle);

// Where a plugin of a kind other than shared_library can serve here: the dispatch key
// its kernels register for (its manifest's; CPU under Triton's interpreter) and a note
// for its record's reason, or, when `unavailable` is set, why it cannot.
struct KindTarget {
  std::string dispatch_key;
  std::string note;
  std::string unavailable;
};

// A plugin kind whose kernels come from another runtime than a library (`kind: triton`:
// Python launchers). The Python bridge (python/src/python_kernels.cpp) sets the triton
// one when `import backplane` runs; in a process without one (the C++ command) such a
// plugin is listed, and refused by name, as unavailable. Both functions run with the
// loader's mutex held, on the loading thread; they must not wait for a thread that
// waits for the loader (the bridge takes the GIL: every Python entry to the loader
// releases it first, as ctypes does).
struct KindOpener {
  // `opening` false: a listing, which must not run the plugin's code (as a library is not
  // dlopen'ed to be listed): only what can be told without importing it. True: a load.
  std::function<KindTarget(const BackendRecord&, bool opening)> target;
  // Offers its kernels through offer_kernel (kernel.h) while the plugin counts as being
  // loaded, so the manifest's contract and the per-op selection apply as to a library's;
  // returns why it failed, or nullopt.
  std::function<std::optional<std::string>(const BackendRecord&)> offer;
};
BACKPLANE_API void set_kind_opener(const std::string& kind, KindOpener opener);
}  // namespace detail

}  // namespace backplane
