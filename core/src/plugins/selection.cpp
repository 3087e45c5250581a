// Per-op plugin selection: the contract in selection.h.
#include <backplane/plugin/kernel.h>
#include <backplane/loader.h>
#include <backplane/selection.h>
#include <backplane/selection_file.h>

#include "plugins/plugin_loading.h"
#include "plugins/preference_spec.h"
#include "plugins/selection_environment.h"
#include "plugins/selection_slot.h"
#include "util/strings.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace backplane {
namespace {

using detail::check_preference;
using detail::choose;
using detail::FileRules;
using detail::HeldPreference;
using detail::HeldPreferences;
using detail::Offer;
using detail::Selector;
using detail::Slot;
using detail::is_plugin_op_name;
using detail::join;
using detail::parse_spec;
using detail::to_spec;




std::atomic<std::size_t> registrations{0};

class Selection {
 public:
  static Selection& get() {
    static Selection* instance = new Selection();  // never destroyed: plugins outlive statics
    return *instance;
  }

  void offer(torch::Library& m, const char* name, c10::DispatchKey key, c10::KernelFunction kernel,
             torch::CppFunction&& direct) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    ++registrations;
    detail::LoadingPlugin* plugin = detail::loading_plugin();
    if (plugin == nullptr) {  // opened outside the loader (the manifest tool, torch.ops.load_library)
      m.impl(name, std::move(direct));
      return;
    }
    const OpDef* def = detail::admit_registration(*plugin, name, key);  // the manifest's contract
    if (def == nullptr) return;
    const std::string op = def->id(), qualified = def->qualified_name();
    const std::string key_name = c10::toString(key);
    auto existing = slots_.find({op, key});
    if (existing == slots_.end()) {
      auto handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(qualified, ""));
      if (handle && handle->hasKernelForDispatchKey(key)) {
        plugin->violations.push_back("would register " + qualified + " for " + key_name +
                                     ", already registered directly (m.impl) by a plugin the core cannot choose "
                                     "between");
        return;
      }
    }
    plugin->offered.push_back(op);
    auto& slot = slots_[{op, key}];
    if (!slot) {
      slot = std::make_unique<Slot>();
      slot->op = op;
      slot->ns = def->ns;
      slot->op_name = def->name;
      slot->key = key;
    }
    slot->offers.push_back({plugin->name, std::move(kernel)});
    if (slot->offers.size() == 1) m.impl(def->name.c_str(), std::move(direct));  // the only offer: no selector in the way
    choose(*slot, prefs_, file_rules_, file_path_);
  }

  void after_load(const std::string& plugin) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (std::find(loaded_.begin(), loaded_.end(), plugin) == loaded_.end()) loaded_.push_back(plugin);
    for (auto& [_, slot] : slots_) {
      if (slot->offers.size() < 2 || slot->selector) continue;
      // Installing over the first plugin's kernel is deliberate: keep PyTorch's
      // "Overriding a previously registered kernel" warning out of the user's way.
      DropOverrideWarnings quiet;
      slot->selector = std::make_unique<torch::Library>(torch::Library::IMPL, slot->ns, slot->key, __FILE__, __LINE__);
      slot->selector->impl(slot->op_name.c_str(),
                           torch::CppFunction::makeFromBoxedFunctor(std::make_unique<Selector>(slot.get())));
    }
    for (auto& [_, slot] : slots_) {
      if (slot->offers.empty()) continue;
      choose(*slot, prefs_, file_rules_, file_path_);
      if (slot->offers.size() > 1 && slot->why == "loaded first" && !slot->warned) {
        slot->warned = true;
        TORCH_WARN("backplane: ", slot->op, " on ", c10::toString(slot->key), " is offered by ", offered_by(*slot),
                   "; '", slot->serving, "' serves it (loaded first). Choose with BACKPLANE_PREFER=", slot->op, ":",
                   slot->offers.back().plugin, ", backplane.prefer() or --prefer.");
      }
    }
  }

  void withdraw(const std::string& plugin) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    loaded_.erase(std::remove(loaded_.begin(), loaded_.end(), plugin), loaded_.end());
    for (auto& [_, slot] : slots_) {
      // Moved aside, never freed: `chosen` may point at one until choose() runs, and a
      // selector on another thread may be reading it.
      for (auto it = slot->offers.begin(); it != slot->offers.end();) {
        auto next = std::next(it);
        if (it->plugin == plugin) slot->retired.splice(slot->retired.end(), slot->offers, it);
        it = next;
      }
      if (!slot->offers.empty()) choose(*slot, prefs_, file_rules_, file_path_);
    }
  }

  std::uint64_t hold(const std::string& op, const std::vector<std::string>& plugins) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    const std::uint64_t token = next_token_++;
    prefs_[op].push_back({token, plugins});
    choose_all();
    return token;
  }

  // withdraw: the hold's preference goes, and the newest one left for its op applies.
  // Else it stays for good, and the older ones beneath it, which can never apply again, go.
  void release(std::uint64_t token, bool withdraw) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    for (auto it = prefs_.begin(); it != prefs_.end(); ++it) {
      auto& held = it->second;
      auto found = std::find_if(held.begin(), held.end(), [&](const HeldPreference& h) { return h.token == token; });
      if (found == held.end()) continue;
      if (withdraw)
        held.erase(found);
      else
        held.erase(held.begin(), found);
      // "No preference" with nothing beneath it is the same as none.
      while (!held.empty() && held.front().plugins.empty()) held.erase(held.begin());
      if (held.empty()) prefs_.erase(it);
      choose_all();
      return;
    }
  }

  // The preference in force for each op: its newest.
  std::map<std::string, std::vector<std::string>> preferences() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& [op, held] : prefs_)
      if (!held.back().plugins.empty()) out[op] = held.back().plugins;
    return out;
  }

  void replace_all(const std::map<std::string, std::vector<std::string>>& prefs) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    prefs_.clear();
    for (const auto& [op, plugins] : prefs) prefs_[op].push_back({next_token_++, plugins});
    choose_all();
  }

  void set_file(const std::string& path, const std::vector<SelectionRule>& rules, bool strict) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    check_plugins_loaded(path, rules, strict);
    file_rules_.clear();
    for (const auto& r : rules) file_rules_[{r.op, r.dispatch_key}].push_back(r);
    // The entries naming a dtype first, in the file's order: choose() reports the one
    // without dtype as "other dtypes", after them.
    for (auto& [_, of_op] : file_rules_)
      std::stable_partition(of_op.begin(), of_op.end(), [](const SelectionRule& r) { return !r.dtype.empty(); });
    rules_ = rules;
    file_path_ = path;
    choose_all();
  }

  std::vector<SelectionRule> rules() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return rules_;
  }

  std::string file() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return file_path_;
  }

  std::vector<ServingRecord> records() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    std::vector<ServingRecord> out;
    for (const auto& [_, slot] : slots_) {
      if (slot->offers.empty()) continue;  // its only plugin failed after dlopen
      ServingRecord r{slot->op, c10::toString(slot->key), {}, slot->serving, slot->why, slot->buckets};
      for (const auto& o : slot->offers) r.offered_by.push_back(o.plugin);
      out.push_back(std::move(r));
    }
    return out;
  }

 private:
  struct DropOverrideWarnings : c10::WarningHandler {
    c10::WarningHandler* previous = c10::WarningUtils::get_warning_handler();
    c10::WarningUtils::WarningHandlerGuard guard{this};
    void process(const c10::Warning& warning) override {
      if (warning.msg().find("Overriding a previously registered kernel") == std::string::npos) previous->process(warning);
    }
  };

  static std::string offered_by(const Slot& slot) {
    std::string out;
    for (const auto& o : slot.offers) out += (out.empty() ? "'" : ", '") + o.plugin + "'";
    return out;
  }

  // A bucket naming a plugin that is not loaded falls back to the rule without the file
  // (selection_file.h): right on a machine without that plugin, silent for a misspelled
  // name. Said once per apply; refused (nothing applied) under strict. Only against the
  // plugins loaded now: with none loaded yet (BACKPLANE_SELECTION, read as the core
  // loads) there is nothing to compare with, and only strict speaks.
  void check_plugins_loaded(const std::string& path, const std::vector<SelectionRule>& rules, bool strict) const {
    std::vector<std::string> unloaded, not_offering;
    for (const auto& rule : rules)
      for (std::size_t i = 0; i < rule.buckets.size(); ++i) {
        const std::string& plugin = rule.buckets[i].plugin;
        if (plugin == kInductor) continue;  // no plugin: the compile-time pass serves it
        const std::string where = "op '" + rule.op + "' on " + rule.dispatch_key + ", bucket " + std::to_string(i + 1) +
                                  ": '" + plugin + "'";
        if (std::find(loaded_.begin(), loaded_.end(), plugin) == loaded_.end())
          unloaded.push_back(where);
        else if (!offers(rule.op, rule.dispatch_key, plugin))
          not_offering.push_back(where);  // loaded, and has no kernel for this op on this key
      }
    if ((unloaded.empty() && not_offering.empty()) || (!strict && loaded_.empty())) return;
    const std::string loaded = loaded_.empty() ? "none" : join(loaded_, ", ");
    std::string what = path + ":";
    if (!unloaded.empty()) what += " names plugins that are not loaded (loaded: " + loaded + "): " + join(unloaded, "; ");
    if (!not_offering.empty())
      what += std::string(unloaded.empty() ? "" : ";") + " names loaded plugins that serve no kernel for that op there: " +
              join(not_offering, "; ");
    if (strict)
      throw std::invalid_argument(what + " (strict: every plugin a selection file names must be loaded and serve the op)");
    TORCH_WARN("backplane: selection file ", what, "; calls of those sizes go to the plugin serving without the file");
  }

  // Whether `plugin` offered a kernel for op on the key named `key_name` ("CPU"; a name
  // this torch does not know has no offers).
  bool offers(const std::string& op, const std::string& key_name, const std::string& plugin) const {
    c10::DispatchKey key;
    try {
      key = c10::parseDispatchKey(key_name);
    } catch (const std::exception&) {
      return false;
    }
    auto slot = slots_.find({op, key});
    return slot != slots_.end() && std::any_of(slot->second->offers.begin(), slot->second->offers.end(),
                                               [&](const Offer& o) { return o.plugin == plugin; });
  }

  void choose_all() {
    for (auto& [_, slot] : slots_)
      if (!slot->offers.empty()) choose(*slot, prefs_, file_rules_, file_path_);
  }


  std::recursive_mutex mutex_;
  std::map<std::pair<std::string, c10::DispatchKey>, std::unique_ptr<Slot>> slots_;
  HeldPreferences prefs_;
  std::uint64_t next_token_ = 1;
  FileRules file_rules_;
  std::vector<SelectionRule> rules_;  // the file's, as read
  std::string file_path_;
  std::vector<std::string> loaded_;  // plugins loaded (after_load), in load order
};

// BACKPLANE_PREFER applies from the start; a bad value is a warning, not a crash of
// whatever process loaded the core.
const bool env_applied = [] {
  const char* env = std::getenv("BACKPLANE_PREFER");
  if (env == nullptr || *env == '\0') return false;
  try {
    for (const auto& [op, plugins] : parse_spec(env)) prefer(op, plugins);
  } catch (const std::exception& e) {
    TORCH_WARN("backplane: ignoring BACKPLANE_PREFER: ", e.what());
  }
  return true;
}();

// BACKPLANE_SELECTION (a selection file) likewise; read after BACKPLANE_PREFER, whose
// preference for an op overrides the file's rule for it wherever they meet.
const bool selection_env_applied = [] {
  const char* env = std::getenv("BACKPLANE_SELECTION");
  if (env == nullptr || *env == '\0') return false;
  try {
    apply_selection_file(env);
  } catch (const std::exception& e) {
    TORCH_WARN("backplane: ignoring BACKPLANE_SELECTION: ", e.what());
  }
  return true;
}();

}  // namespace

namespace detail {

std::string chosen_op_id(const std::string& op) {
  if (const OpDef* def = find_op_def(op)) return def->id();
  if (op.find("::") == std::string::npos || op.rfind(std::string(kNamespace) + "::", 0) == 0)
    throw std::invalid_argument("no op '" + op + "' in the registry or a loaded plugin's fragment");
  if (!is_plugin_op_name(op))  // kept as written: it must read back as the grammar's op
    throw std::invalid_argument("'" + op + "' is not an op name (a plugin's own is ns::name)");
  return op;
}

void offer_kernel(torch::Library& m, const char* op, c10::DispatchKey key, c10::KernelFunction kernel,
                  torch::CppFunction&& direct) {
  Selection::get().offer(m, op, key, std::move(kernel), std::move(direct));
}

std::size_t core_registrations() { return registrations.load(); }

void after_plugin_loaded(const std::string& plugin) { Selection::get().after_load(plugin); }

void withdraw_offers(const std::string& plugin) { Selection::get().withdraw(plugin); }

}  // namespace detail

std::uint64_t hold_preference(const std::string& op, const std::vector<std::string>& plugins) {
  return Selection::get().hold(check_preference(op, plugins, "preference '" + op + ":" + join(plugins, ",") + "'"), plugins);
}

void release_preference(std::uint64_t token, bool withdraw) { Selection::get().release(token, withdraw); }

void prefer(const std::string& op, const std::vector<std::string>& plugins) {
  release_preference(hold_preference(op, plugins), false);  // an empty list clears op's preference
}

void prefer_from_string(const std::string& spec) {
  for (const auto& [op, plugins] : parse_spec(spec)) prefer(op, plugins);
}

void set_preferences(const std::string& spec) { Selection::get().replace_all(parse_spec(spec)); }

std::string preferences_string() { return to_spec(Selection::get().preferences()); }

ScopedPreference::ScopedPreference(const std::string& op, const std::vector<std::string>& plugins)
    : token_(hold_preference(op, plugins)) {}

ScopedPreference::~ScopedPreference() { release_preference(token_, true); }

std::vector<ServingRecord> serving() { return Selection::get().records(); }

std::string serving_plugin(const std::string& op, const std::string& dispatch_key) {
  for (const auto& r : serving())
    if (r.op == op && r.dispatch_key == dispatch_key) return r.serving;
  return "";
}

void apply_selection_file(const std::string& path, bool strict) { apply_selection_file(path, strict, "", {}); }

void apply_selection_file(const std::string& path, bool strict, const std::string& torch_here,
                          const std::vector<SelectionDevice>& devices_here) {
  const SelectionFile file = read_selection(path);
  // Before the selection's lock: listing the plugins takes the loader's, which is held
  // while a plugin registers its kernels with the selection.
  // Only where the file records plugins: listing them searches the plugin path.
  std::vector<BackendRecord> loaded;
  if (!file.environment.plugins.empty())
    for (auto& r : backends())
      if (r.status == BackendStatus::Loaded) loaded.push_back(std::move(r));
  const std::vector<std::string> differences =
      detail::environment_differences(file.environment, torch_here, devices_here, loaded);
  if (!differences.empty()) {
    const std::string what = path + " was measured elsewhere: " + join(differences, "; ");
    if (strict) throw std::invalid_argument(what + " (strict: a selection file must be applied where it was measured)");
    TORCH_WARN("backplane: selection file ", what, "; its choices may not be the fastest here (run backplane tune "
               "here to measure them)");
  }
  Selection::get().set_file(path, file.rules, strict);
}

std::vector<SelectionRule> selection_rules() { return Selection::get().rules(); }

void clear_selection_file() { Selection::get().set_file("", {}, false); }

std::string selection_file() { return Selection::get().file(); }

}  // namespace backplane
