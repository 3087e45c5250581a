// A plugin's checks before dlopen (plugin_inspection.h).
#include "plugins/plugin_inspection.h"

#include "plugins/manifest.h"
#include <backplane/registry.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceType.h>
#include <c10/core/DispatchKey.h>

#include "util/posix_files.h"

#include <algorithm>

namespace backplane::detail {
namespace {

using Records = std::map<std::string, BackendRecord>;

// PyTorch has one PrivateUse1 device per process: a second device plugin would override
// the first one's aten kernels and then abort on its fallback registration.
std::optional<std::string> privateuse1_taken(const std::string& name, const Records& known) {
  for (const auto& [other, record] : known)
    if (other != name && record.status == BackendStatus::Loaded && record.dispatch_key == "PrivateUse1")
      return "PrivateUse1 already belongs to backend '" + other + "' (" + record.path +
             "); PyTorch allows one PrivateUse1 device per process, so load only one of '" + other + "' and '" +
             name + "' (--backends, BACKPLANE_BACKENDS)";
  const std::string taken = c10::get_privateuse1_backend(/*lower_case=*/true);
  if (taken != "privateuseone" && taken != name)
    return "PrivateUse1 is already registered as device '" + taken +
           "' in this process (by a library not loaded through backplane); PyTorch allows one PrivateUse1 device "
           "per process";
  return std::nullopt;
}

// A plugin registering with plain m.impl cannot share a device: it would silently
// override the kernel already there (PyTorch only warns). Plugins registering through
// the core can (selection.h).
std::optional<std::string> direct_conflict(const std::string& name, const OpDef& def, c10::DispatchKey key,
                                           const Records& known) {
  const std::string op = def.id();
  auto handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(def.qualified_name(), ""));
  if (!handle || !handle->hasKernelForDispatchKey(key)) return std::nullopt;
  std::string holder = "a library not loaded through backplane";
  for (const auto& [other, record] : known)
    if (other != name && record.status == BackendStatus::Loaded && record.dispatch_key == c10::toString(key) &&
        std::count(record.ops.begin(), record.ops.end(), op))
      holder = "backend '" + other + "' (" + record.path + ")";
  return "would register " + def.qualified_name() + " for " + c10::toString(key) + ", already registered by " + holder +
         "; it registers directly (m.impl), so it cannot share the device: register with BACKPLANE_KERNEL to let "
         "the core choose per op";
}

}  // namespace

BackendRecord inspect_plugin(const std::string& name, const std::string& plugin_path, const Records& known,
                             std::optional<Fragment>* fragment_out) {
  BackendRecord record;
  record.name = name;
  record.path = real_path(plugin_path);
  const std::string manifest_path = join_path(parent_dir(plugin_path), manifest_file_name(name));
  auto reject = [&](const std::string& why) {
    record.status = BackendStatus::Rejected;
    record.reason = why;
    return record;
  };
  // dlopen of a FIFO would block for a writer, whatever the probe's time limit.
  if (auto why = not_a_regular_file(record.path)) return reject("the plugin file cannot be opened: " + *why);
  if (!file_exists(manifest_path))
    return reject("no manifest " + manifest_path +
                  " beside the plugin; plugins without one are not opened (build them with backplane_add_plugin)");
  Manifest manifest;
  try {
    manifest = read_manifest(manifest_path);
  } catch (const std::exception& e) {
    return reject(e.what());
  }
  const bool lone_manifest = plugin_path == manifest_path;  // no library beside it (plugin_discovery.h)
  if (manifest.kind == "shared_library" && lone_manifest)
    return reject("no plugin library " + join_path(parent_dir(plugin_path), plugin_file_name(name)) +
                  " beside its manifest (kind shared_library); a plugin that is no library says kind: triton");
  if (manifest.kind != "shared_library" && !lone_manifest)
    return reject("its manifest " + manifest_path + " says kind " + manifest.kind + " (no library), but " +
                  record.path + " is beside it: remove the one that does not belong");
  record.kind = manifest.kind;
  record.triton_versions = manifest.triton_versions;
  if (manifest.kind == "triton") record.torch_target = manifest.torch_versions;
  record.version = manifest.version;
  record.dispatch_key = manifest.dispatch_key;
  record.torch_abi = manifest.torch_abi;
  if (manifest.kind == "shared_library") record.torch_target = manifest.torch_version;
  record.ops = manifest.ops;
  if (!manifest.python_module.empty()) {
    record.python_module = manifest.python_module;
    if (!manifest.python_path.empty()) record.python_path = join_path(parent_dir(plugin_path), manifest.python_path);
  }
  if (auto why = manifest_incompatibility(manifest, name)) return reject(*why);
  c10::DispatchKey key;
  try {
    key = c10::parseDispatchKey(manifest.dispatch_key);
  } catch (const std::exception&) {
    return reject("manifest names dispatch key '" + manifest.dispatch_key + "', which this torch does not know");
  }
  if (key == c10::DispatchKey::PrivateUse1)
    if (auto why = privateuse1_taken(name, known)) return reject(*why);
  std::optional<Fragment> fragment;
  if (!manifest.registry.empty()) {
    // Beside the plugin as found (as the manifest is), then canonical: one file, one name.
    const std::string fragment_path = join_path(parent_dir(plugin_path), manifest.registry);
    record.registry = file_exists(fragment_path) ? real_path(fragment_path) : fragment_path;
    std::string why;
    const std::optional<std::string> text = read_regular_file(record.registry, why);
    if (!text) return reject("its registry fragment " + record.registry + " cannot be read: " + why);
    try {
      fragment = parse_fragment(*text, record.registry);
      check_fragment(*fragment);
    } catch (const std::exception& e) {
      return reject("its registry fragment is refused: " + std::string(e.what()));
    }
  }
  for (const auto& op : manifest.ops) {
    const OpDef* def = find_op_def(op);
    if (!def && fragment)
      for (const OpDef& own : fragment->ops)
        if (own.id() == op) def = &own;
    if (!def)
      return reject("manifest lists op '" + op + "', which the registry does not define" +
                    (fragment ? ", nor does its fragment " + record.registry : std::string()) +
                    " (a plugin's own ops come from a registry fragment: if another plugin's fragment defines it, "
                    "load that plugin first)");
    if (manifest.registration == "direct")
      if (auto why = direct_conflict(name, *def, key, known)) return reject(*why);
  }
  record.status = BackendStatus::Available;
  if (fragment_out) *fragment_out = std::move(fragment);
  return record;
}

}  // namespace backplane::detail
