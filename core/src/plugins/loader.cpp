// Loading plugins: the contract in docs/ARCHITECTURE.md ("The plugin contract").
#include <backplane/loader.h>
#include <backplane/manifest.h>
#include <backplane/registry.h>
#include <backplane/vendor_ops.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DeviceType.h>

#include "plugins/plugin_loading.h"
#include "plugins/stable_kernels.h"
#include "plugins/posix_files.h"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <sstream>


namespace backplane {

const char* to_string(BackendStatus status) {
  switch (status) {
    case BackendStatus::Loaded: return "loaded";
    case BackendStatus::Available: return "available";
    case BackendStatus::Rejected: return "rejected";
    case BackendStatus::Failed: return "failed";
  }
  return "unknown";
}

namespace {

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

std::optional<c10::OperatorHandle> find_op(const OpDef& op) {
  return c10::Dispatcher::singleton().findOp(c10::OperatorName(op.qualified_name(), ""));
}

class Loader {
 public:
  BackendRecord load(const std::string& name, const LoadOptions& options) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (!is_valid_backend_name(name))
      throw BackendError("invalid backend name '" + name +
                         "': expected a plain identifier ([A-Za-z_][A-Za-z0-9_]*); paths, '/' and '..' are refused");
    const std::vector<std::string> dirs = plugin_search_path(options);
    const std::optional<std::string> found = find_plugin(name, dirs);
    auto known = records_.find(name);
    if (known != records_.end() && known->second.status == BackendStatus::Loaded) {
      if (found && canonical(*found) != known->second.path)
        throw BackendError("backend '" + name + "' is already loaded from " + known->second.path +
                           "; refusing to load a second copy from " + canonical(*found));
      return known->second;
    }
    if (!found)
      throw BackendError("backend '" + name + "' not found: looked for " + plugin_file_name(name) + " in [" +
                         join(dirs) + "]" + available_hint(dirs) +
                         ". Set BACKPLANE_PLUGIN_PATH or pass a directory.");
    // A plugin that failed after dlopen stays failed: reopening returns the same handle
    // without running its registrations again, so it would pass for loaded.
    if (known != records_.end() && opened_.count(name))
      throw BackendError("backend '" + name + "' " + to_string(known->second.status) + " (" + known->second.path +
                         "): " + known->second.reason);
    BackendRecord record = open(name, *found);
    records_[name] = record;
    if (record.status != BackendStatus::Loaded)
      throw BackendError("backend '" + name + "' " + to_string(record.status) + " (" + record.path + "): " +
                         record.reason);
    return record;
  }

  std::vector<BackendRecord> load_discovered(const LoadOptions& options) {
    {
      std::lock_guard<std::recursive_mutex> lock(mutex_);
      for (const auto& [name, path] : discover(plugin_search_path(options))) {
        auto known = records_.find(name);
        if (known != records_.end() && (known->second.status == BackendStatus::Loaded || opened_.count(name)))
          continue;
        records_[name] = open(name, path);
      }
    }
    return backends(options);
  }

  std::vector<BackendRecord> backends(const LoadOptions& options) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    std::map<std::string, BackendRecord> all = records_;
    for (const auto& [name, path] : discover(plugin_search_path(options)))
      if (!all.count(name)) all[name] = inspect(name, path);
    std::vector<BackendRecord> out;
    for (auto& [_, record] : all) out.push_back(std::move(record));
    return out;
  }

 private:
  static std::string canonical(const std::string& path) { return detail::real_path(path); }

  static std::optional<std::string> find_plugin(const std::string& name, const std::vector<std::string>& dirs) {
    for (const auto& dir : dirs) {
      const std::string candidate = detail::join_path(dir, plugin_file_name(name));
      if (detail::file_exists(candidate)) return candidate;
    }
    return std::nullopt;
  }

  // name -> path of every libbackplane_<name>.so on the search path; the first
  // directory that has a name wins.
  static std::map<std::string, std::string> discover(const std::vector<std::string>& dirs) {
    std::map<std::string, std::string> found;
    const std::string prefix = "libbackplane_", suffix = ".so";
    for (const auto& dir : dirs) {
      std::vector<std::string> files = detail::list_dir(dir);
      std::sort(files.begin(), files.end());  // the same listing on every file system
      for (const auto& file : files) {
        if (file.size() <= prefix.size() + suffix.size() || file.rfind(prefix, 0) != 0 ||
            file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
          continue;
        const std::string name = file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
        if (is_valid_backend_name(name) && !found.count(name)) found[name] = detail::join_path(dir, file);
      }
    }
    return found;
  }

  static std::string available_hint(const std::vector<std::string>& dirs) {
    std::vector<std::string> names;
    for (const auto& [name, _] : discover(dirs)) names.push_back(name);
    return names.empty() ? "; no plugins there" : "; found plugins: " + join(names);
  }

  // Everything that can be decided without opening the file. Status Available or Rejected.
  // `fragment`, when given, receives the plugin's parsed registry fragment (open() defines
  // it), so the file is read and parsed once per load.
  BackendRecord inspect(const std::string& name, const std::string& plugin_path,
                        std::optional<Fragment>* fragment_out = nullptr) const {
    BackendRecord record;
    record.name = name;
    record.path = canonical(plugin_path);
    const std::string manifest_path = detail::join_path(detail::parent_dir(plugin_path), manifest_file_name(name));
    auto reject = [&](const std::string& why) {
      record.status = BackendStatus::Rejected;
      record.reason = why;
      return record;
    };
    // dlopen of a FIFO would block for a writer, whatever the probe's time limit.
    if (auto why = detail::not_a_regular_file(record.path)) return reject("the plugin file cannot be opened: " + *why);
    if (!detail::file_exists(manifest_path))
      return reject("no manifest " + manifest_path +
                    " beside the plugin; plugins without one are not opened (build them with backplane_add_plugin)");
    Manifest manifest;
    try {
      manifest = read_manifest(manifest_path);
    } catch (const std::exception& e) {
      return reject(e.what());
    }
    record.version = manifest.version;
    record.dispatch_key = manifest.dispatch_key;
    record.torch_abi = manifest.torch_abi;
    record.torch_target = manifest.torch_version;
    record.ops = manifest.ops;
    if (!manifest.python_module.empty()) {
      record.python_module = manifest.python_module;
      if (!manifest.python_path.empty())
        record.python_path = detail::join_path(detail::parent_dir(plugin_path), manifest.python_path);
    }
    if (auto why = manifest_incompatibility(manifest, name)) return reject(*why);
    c10::DispatchKey key;
    try {
      key = c10::parseDispatchKey(manifest.dispatch_key);
    } catch (const std::exception&) {
      return reject("manifest names dispatch key '" + manifest.dispatch_key + "', which this torch does not know");
    }
    if (key == c10::DispatchKey::PrivateUse1)
      if (auto why = privateuse1_taken(name)) return reject(*why);
    std::optional<Fragment> fragment;
    if (!manifest.registry.empty()) {
      // Beside the plugin as found (as the manifest is), then canonical: one file, one name.
      const std::string fragment_path = detail::join_path(detail::parent_dir(plugin_path), manifest.registry);
      record.registry = detail::file_exists(fragment_path) ? canonical(fragment_path) : fragment_path;
      std::string why;
      const std::optional<std::string> text = detail::read_regular_file(record.registry, why);
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
        if (auto why = direct_conflict(name, *def, key)) return reject(*why);
    }
    record.status = BackendStatus::Available;
    if (fragment_out) *fragment_out = std::move(fragment);
    return record;
  }

  // PyTorch has one PrivateUse1 device per process: a second device plugin would override
  // the first one's aten kernels and then abort on its fallback registration.
  std::optional<std::string> privateuse1_taken(const std::string& name) const {
    for (const auto& [other, record] : records_)
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
  std::optional<std::string> direct_conflict(const std::string& name, const OpDef& def, c10::DispatchKey key) const {
    const std::string op = def.id();
    auto handle = find_op(def);
    if (!handle || !handle->hasKernelForDispatchKey(key)) return std::nullopt;
    std::string holder = "a library not loaded through backplane";
    for (const auto& [other, record] : records_)
      if (other != name && record.status == BackendStatus::Loaded && record.dispatch_key == c10::toString(key) &&
          std::count(record.ops.begin(), record.ops.end(), op))
        holder = "backend '" + other + "' (" + record.path + ")";
    return "would register " + def.qualified_name() + " for " + c10::toString(key) + ", already registered by " + holder +
           "; it registers directly (m.impl), so it cannot share the device: register with BACKPLANE_KERNEL to let "
           "the core choose per op";
  }

  BackendRecord open(const std::string& name, const std::string& plugin_path) {
    std::optional<Fragment> fragment;
    BackendRecord record = inspect(name, plugin_path, &fragment);
    if (record.status != BackendStatus::Available) return record;
    if (!poisoned_.empty()) {
      record.status = BackendStatus::Failed;
      record.reason = "not opened: " + poisoned_;
      return record;
    }
    // Its own ops first: its kernels register for them while dlopen runs.
    if (fragment) {
      try {
        define_fragment(*fragment, name);
      } catch (const std::exception& e) {
        record.status = BackendStatus::Rejected;
        record.reason = "its registry fragment is refused: " + std::string(e.what());
        return record;
      }
    }
    // RTLD_LOCAL: a plugin's symbols stay its own (plugins also build with hidden
    // visibility). The handle is deliberately never closed.
    // Its kernels register during dlopen, through the core (kernel.h), which checks each
    // against the manifest and keeps every plugin's kernel when two serve one device.
    detail::LoadingPlugin loading{name, record.dispatch_key, record.ops, {}, {}};
    // Registrations made with a plain m.impl bypass the core: what the dispatcher holds
    // before and after dlopen shows them, whatever the manifest says.
    const DispatcherState before = dispatcher_state();
    void* handle = nullptr;
    std::optional<std::string> stable_failure;
    try {
      detail::LoadingScope scope(&loading);
      // glibc declares dlopen noexcept, so a throw from a static initializer reaching a
      // direct call would end in std::terminate: called through a pointer the compiler
      // cannot see through, the exception reaches the handlers below.
      static void* (*volatile open_library)(const char*, int) = &dlopen;
      handle = open_library(record.path.c_str(), RTLD_NOW | RTLD_LOCAL);
      // A stable plugin's kernels are offered now, through the core's C interface
      // (stable_api.h), while it still counts as the plugin loading.
      if (handle != nullptr && record.torch_abi == "stable") stable_failure = detail::init_stable_plugin(handle);
    } catch (const std::exception& e) {  // a static initializer threw through dlopen
      return threw_while_opening(name, record, std::string("its static initializer threw while opening: ") + e.what());
    } catch (...) {
      return threw_while_opening(name, record, "its static initializer threw a non-standard exception while opening");
    }
    if (handle != nullptr) opened_.insert(name);
    if (handle == nullptr) {
      const char* err = dlerror();
      record.status = BackendStatus::Failed;
      record.reason = std::string("dlopen failed: ") + (err ? err : "unknown error");
      return record;
    }
    if (stable_failure) {
      detail::withdraw_offers(name);
      record.status = BackendStatus::Failed;
      record.reason = *stable_failure;
      return record;
    }
    const DispatcherState after = dispatcher_state();
    const std::vector<std::string> undeclared = undeclared_registrations(before, after, record);
    if (!undeclared.empty()) {
      // Its kernels cannot be taken back safely (closing the library would leave whatever
      // else it registered dangling), so it is reported, with what to do.
      detail::withdraw_offers(name);
      record.status = BackendStatus::Failed;
      record.reason = "its manifest " + detail::join_path(detail::parent_dir(record.path), manifest_file_name(name)) +
                      " declares key " + record.dispatch_key + ", ops [" + join(record.ops) + "], but the library " +
                      join(undeclared, "; ") + "; those kernels stay registered in this process: restart it without "
                      "this plugin (`backplane list` probes plugins in a child process first)";
      return record;
    }
    detail::after_plugin_loaded(name);
    if (!loading.violations.empty()) {
      record.status = BackendStatus::Failed;
      record.reason = "registrations refused (its manifest " +
                      detail::join_path(detail::parent_dir(record.path), manifest_file_name(name)) + " declares key " +
                      record.dispatch_key + ", ops [" + join(record.ops) + "]): it " + join(loading.violations, "; it ");
      return record;
    }
    record.status = BackendStatus::Loaded;
    record.ops = registered_ops(before, after, record.dispatch_key, loading.offered);
    return record;
  }

  // Per op id, the dispatcher's account of it (torch's dumpState: a line per kernel,
  // "KEY: registered at FILE:LINE ...", "KEY (inactive): ..." once another overrides it).
  using DispatcherState = std::map<std::string, std::set<std::string>>;

  static DispatcherState dispatcher_state() {
    DispatcherState state;
    for (const OpDef& op : all_ops()) {
      auto handle = find_op(op);
      if (!handle) continue;
      std::stringstream dump(handle->dumpState());
      for (std::string line; std::getline(dump, line);) {
        const auto inactive = line.find(" (inactive)");
        if (inactive != std::string::npos) line.erase(inactive, 11);
        state[op.id()].insert(line);
      }
    }
    return state;
  }

  // The dispatch key a dumpState line is about; empty for lines that are not a kernel's.
  static std::string line_key(const std::string& line) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) return "";
    std::string key = line.substr(0, colon);
    if (key.size() > 7 && key.compare(key.size() - 7, 7, "[alias]") == 0) key.resize(key.size() - 7);
    if (key == "name" || key == "schema" || key == "debug" || key == "alias analysis kind") return "";
    return key;
  }

  static std::set<std::string> kernel_lines(const DispatcherState& state, const std::string& op, const std::string& key) {
    std::set<std::string> lines;
    if (auto found = state.find(op); found != state.end())
      for (const auto& line : found->second)
        if (line_key(line) == key) lines.insert(line);
    return lines;
  }

  // The ops this plugin's dlopen registered a kernel for on its key, in registry order:
  // those offered through the core, and those whose kernels for the key changed meanwhile
  // (a plain TORCH_LIBRARY_IMPL bypasses the core). Not every kernel the key holds: that
  // would credit it with another plugin's.
  static std::vector<std::string> registered_ops(const DispatcherState& before, const DispatcherState& after,
                                                 const std::string& key, const std::vector<std::string>& offered) {
    std::vector<std::string> ops;
    for (const OpDef& op : all_ops()) {
      const std::string id = op.id();
      if (std::count(offered.begin(), offered.end(), id) || kernel_lines(after, id, key) != kernel_lines(before, id, key))
        ops.push_back(id);
    }
    return ops;
  }

  // Each kernel registration dlopen added outside what the manifest declares (its key,
  // its ops), described with its key and where it was registered.
  static std::vector<std::string> undeclared_registrations(const DispatcherState& before, const DispatcherState& after,
                                                           const BackendRecord& record) {
    std::vector<std::string> found;
    for (const auto& [op, lines] : after) {
      auto was = before.find(op);
      for (const auto& line : lines) {
        if (was != before.end() && was->second.count(line)) continue;
        const std::string key = line_key(line);
        if (key.empty()) continue;
        const bool declared = key == record.dispatch_key && std::count(record.ops.begin(), record.ops.end(), op);
        if (declared) continue;
        const auto at = line.find("registered at ");
        const std::string where = at == std::string::npos ? "" : " (" + line.substr(at, line.find(" ::", at) - at) + ")";
        found.push_back("registered a " + key + " kernel for " + find_op_def(op)->qualified_name() + where);
      }
    }
    return found;
  }

  // A throw that unwound through dlopen leaves glibc's loader lock held and the library
  // half initialized: another thread's dlopen would hang. This process opens no plugin
  // again; the reason says so (backplane list probes in a child process and avoids this).
  BackendRecord threw_while_opening(const std::string& name, BackendRecord& record, const std::string& why) {
    opened_.insert(name);
    detail::withdraw_offers(name);
    record.status = BackendStatus::Failed;
    record.reason = why + "; the dynamic loader may be left locked, so this process opens no more plugins: "
                          "restart it without this one";
    poisoned_ = "plugin '" + name + "' (" + record.path + ") threw through dlopen earlier in this process, which may "
                "leave the dynamic loader locked; restart the process without it";
    return record;
  }

  // Recursive: a plugin's static initializer may call back into the loader while
  // dlopen holds it (it runs on the loading thread).
  std::recursive_mutex mutex_;
  std::map<std::string, BackendRecord> records_;
  std::set<std::string> opened_;  // names dlopen'ed once (a plugin is never opened twice)
  std::string poisoned_;          // why no plugin may be opened any more (threw_while_opening)
};

Loader& loader() {
  static Loader* instance = new Loader();  // never destroyed: plugins outlive static destruction
  return *instance;
}

}  // namespace

BackendRecord load(const std::string& name, const LoadOptions& options) { return loader().load(name, options); }

std::vector<BackendRecord> load(const std::vector<std::string>& names, const LoadOptions& options) {
  std::vector<BackendRecord> out;
  for (const auto& name : names) out.push_back(load(name, options));
  return out;
}

std::vector<BackendRecord> load(std::initializer_list<std::string> names, const LoadOptions& options) {
  return load(std::vector<std::string>(names), options);
}

std::vector<BackendRecord> load_discovered(const LoadOptions& options) { return loader().load_discovered(options); }

std::vector<BackendRecord> backends(const LoadOptions& options) { return loader().backends(options); }

}  // namespace backplane
