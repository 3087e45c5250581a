// Opening a plugin that is no library (manifest kind: triton): PluginOpener::open_kind
// (plugin_opening.h). What a dlopen does for a library, its kind's opener does here
// (loader.h, detail::KindOpener): it offers each kernel through offer_kernel while the
// plugin counts as loading, so the manifest's contract (plugin_loading.h), the dispatcher
// audit and the per-op selection are the ones every library goes through.
#include "plugins/plugin_opening.h"

#include "plugins/dispatcher_audit.h"
#include "plugins/plugin_loading.h"
#include "util/strings.h"

namespace backplane::detail {

BackendRecord PluginOpener::open_kind(BackendRecord record, const KindOpener& opener,
                                      const std::optional<Fragment>& fragment) {
  const std::string& name = record.name;
  // Its own ops first, as for a library: the opener offers its kernels for them.
  if (!define_own_ops(record, fragment)) return record;
  auto failed = [&](const std::string& why) {
    withdraw_offers(name);
    record.status = BackendStatus::Failed;
    record.reason = why;
    return record;
  };
  LoadingPlugin loading{name, record.dispatch_key, record.ops, {}, {}};
  const DispatcherState before = dispatcher_state();
  std::optional<std::string> failure;
  try {
    LoadingScope scope(&loading);
    failure = opener.offer(record);
  } catch (const std::exception& e) {
    failure = std::string("offering its kernels failed: ") + e.what();
  }
  // Whatever it offered stays registered (as a library's kernels do): it loads once.
  opened_.insert(name);
  if (failure) return failed(*failure);
  const DispatcherState after = dispatcher_state();
  const std::vector<std::string> undeclared = undeclared_registrations(before, after, record.dispatch_key, record.ops);
  if (!undeclared.empty())
    return failed("its manifest " + record.path + " declares key " + record.dispatch_key + ", ops [" +
                  join(record.ops) + "], but loading it " + join(undeclared, "; ") +
                  "; those kernels stay registered in this process: restart it without this plugin");
  after_plugin_loaded(name);
  if (!loading.violations.empty()) {
    record.status = BackendStatus::Failed;
    record.reason = "registrations refused (its manifest " + record.path + " declares key " + record.dispatch_key +
                    ", ops [" + join(record.ops) + "]): it " + join(loading.violations, "; it ");
    return record;
  }
  record.status = BackendStatus::Loaded;
  record.ops = registered_ops(before, after, record.dispatch_key, loading.offered);
  return record;
}

}  // namespace backplane::detail
