// dlopen, and what it leaves behind (plugin_opening.h).
#include "plugins/plugin_opening.h"

#include "plugins/manifest.h"

#include "plugins/dispatcher_audit.h"
#include "plugins/plugin_loading.h"
#include "util/posix_files.h"
#include "util/strings.h"

#include <dlfcn.h>

namespace backplane::detail {

BackendRecord PluginOpener::open(BackendRecord record, const std::optional<Fragment>& fragment) {
  const std::string& name = record.name;
  if (!poisoned_.empty()) {
    record.status = BackendStatus::Failed;
    record.reason = "not opened: " + poisoned_;
    return record;
  }
  // Its own ops first: its kernels register for them while dlopen runs.
  if (!define_own_ops(record, fragment)) return record;
  // RTLD_LOCAL: a plugin's symbols stay its own (plugins also build with hidden
  // visibility). The handle is deliberately never closed.
  // Its kernels register during dlopen, through the core (kernel.h), which checks each
  // against the manifest (plugin_loading.h) and keeps every plugin's kernel when two
  // serve one device.
  LoadingPlugin loading{name, record.dispatch_key, record.ops, {}, {}};
  // Registrations made with a plain m.impl bypass the core: what the dispatcher holds
  // before and after dlopen shows them, whatever the manifest says.
  const DispatcherState before = dispatcher_state();
  void* handle = nullptr;
  std::optional<std::string> stable_failure;
  try {
    LoadingScope scope(&loading);
    // glibc declares dlopen noexcept, so a throw from a static initializer reaching a
    // direct call would end in std::terminate: called through a pointer the compiler
    // cannot see through, the exception reaches the handlers below.
    static void* (*volatile open_library)(const char*, int) = &dlopen;
    handle = open_library(record.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    // A stable plugin's kernels are offered now, through the core's C interface
    // (stable_api.h), while it still counts as the plugin loading.
    if (handle != nullptr && record.torch_abi == "stable") stable_failure = init_stable_plugin(handle);
  } catch (const std::exception& e) {  // a static initializer threw through dlopen
    return threw_while_opening(record, std::string("its static initializer threw while opening: ") + e.what());
  } catch (...) {
    return threw_while_opening(record, "its static initializer threw a non-standard exception while opening");
  }
  if (handle == nullptr) {
    const char* err = dlerror();
    record.status = BackendStatus::Failed;
    record.reason = std::string("dlopen failed: ") + (err ? err : "unknown error");
    return record;
  }
  opened_.insert(name);
  if (stable_failure) {
    withdraw_offers(name);
    record.status = BackendStatus::Failed;
    record.reason = *stable_failure;
    return record;
  }
  const std::string manifest = join_path(parent_dir(record.path), manifest_file_name(name));
  const DispatcherState after = dispatcher_state();
  const std::vector<std::string> undeclared = undeclared_registrations(before, after, record.dispatch_key, record.ops);
  if (!undeclared.empty()) {
    // Its kernels cannot be taken back safely (closing the library would leave whatever
    // else it registered dangling), so it is reported, with what to do.
    withdraw_offers(name);
    record.status = BackendStatus::Failed;
    record.reason = "its manifest " + manifest + " declares key " + record.dispatch_key + ", ops [" + join(record.ops) +
                    "], but the library " + join(undeclared, "; ") +
                    "; those kernels stay registered in this process: restart it without "
                    "this plugin (`backplane list` probes plugins in a child process first)";
    return record;
  }
  after_plugin_loaded(name);
  if (!loading.violations.empty()) {
    record.status = BackendStatus::Failed;
    record.reason = "registrations refused (its manifest " + manifest + " declares key " + record.dispatch_key +
                    ", ops [" + join(record.ops) + "]): it " + join(loading.violations, "; it ");
    return record;
  }
  record.status = BackendStatus::Loaded;
  record.ops = registered_ops(before, after, record.dispatch_key, loading.offered);
  return record;
}

bool PluginOpener::define_own_ops(BackendRecord& record, const std::optional<Fragment>& fragment) {
  if (!fragment) return true;
  try {
    define_fragment(*fragment, record.name);
  } catch (const std::exception& e) {
    record.status = BackendStatus::Rejected;
    record.reason = "its registry fragment is refused: " + std::string(e.what());
    return false;
  }
  return true;
}

// A throw that unwound through dlopen leaves glibc's loader lock held and the library
// half initialized: another thread's dlopen would hang. This process opens no plugin
// again; the reason says so (backplane list probes in a child process and avoids this).
BackendRecord PluginOpener::threw_while_opening(BackendRecord& record, const std::string& why) {
  opened_.insert(record.name);
  withdraw_offers(record.name);
  record.status = BackendStatus::Failed;
  record.reason = why + "; the dynamic loader may be left locked, so this process opens no more plugins: "
                        "restart it without this one";
  poisoned_ = "plugin '" + record.name + "' (" + record.path + ") threw through dlopen earlier in this process, which "
              "may leave the dynamic loader locked; restart the process without it";
  return record;
}

}  // namespace backplane::detail
