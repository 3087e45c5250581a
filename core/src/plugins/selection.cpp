// Per-op plugin selection: the contract in selection.h.
#include <backplane/kernel.h>
#include <backplane/loader.h>
#include <backplane/selection.h>
#include <backplane/selection_file.h>

#include "plugins/plugin_loading.h"
#include "plugins/preference_spec.h"

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
using detail::is_plugin_op_name;
using detail::join;
using detail::parse_spec;
using detail::to_spec;

struct Offer {
  std::string plugin;
  c10::KernelFunction kernel;
};

// What the selector calls: one kernel, or one per size bucket of a selection file
// (ascending up_to; the last takes every larger call).
struct Choice {
  std::vector<std::pair<std::int64_t, const c10::KernelFunction*>> by_size;
  bool operator==(const Choice&) const = default;
};

struct Slot {
  std::string op;       // its id: "add", "acme::fused_gelu"
  std::string ns, op_name;  // "acme", "fused_gelu"
  c10::DispatchKey key;
  std::list<Offer> offers;  // a list: `chosen` points into it
  std::list<Offer> retired;  // offers of plugins that failed after dlopen (withdraw)
  // Every distinct choice made so far, never freed: a selector on another thread may be
  // reading the one `chosen` pointed at a moment ago. Distinct: a preference scope
  // entered in a loop reuses the same few.
  std::list<Choice> choices;
  std::atomic<const Choice*> chosen{nullptr};
  std::string serving, why;
  std::vector<SizeBucket> buckets;  // a selection file's split, neighbours of one plugin merged; else empty
  std::unique_ptr<torch::Library> selector;  // once two plugins offer this (op, key)
  bool warned = false;
};

// The element count of the largest Tensor among the call's arguments (the top of the
// stack): a selection file's size. Tensor lists count their largest element.
std::int64_t call_size(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const std::size_t args = std::min(op.schema().arguments().size(), stack.size());
  std::int64_t largest = 0;
  for (std::size_t i = stack.size() - args; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      largest = std::max(largest, v.toTensor().numel());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) largest = std::max(largest, t.numel());
    }
  }
  return largest;
}

// The kernel the dispatcher reaches for an (op, key) two plugins offer: calls the
// chosen plugin's kernel, by the call's size where a selection file splits it.
class Selector final : public c10::OperatorKernel {
 public:
  explicit Selector(const Slot* slot) : slot_(slot) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    const Choice* choice = slot_->chosen.load(std::memory_order_acquire);
    const c10::KernelFunction* kernel = choice->by_size.back().second;
    if (choice->by_size.size() > 1) {
      const std::int64_t size = call_size(op, *stack);
      for (const auto& [up_to, k] : choice->by_size)
        if (size <= up_to) {
          kernel = k;
          break;
        }
    }
    kernel->callBoxed(op, keys, stack);
  }

 private:
  const Slot* slot_;
};

thread_local detail::LoadingPlugin* loading = nullptr;
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
    detail::LoadingPlugin* plugin = loading;
    if (plugin == nullptr) {  // opened outside the loader (the manifest tool, torch.ops.load_library)
      m.impl(name, std::move(direct));
      return;
    }
    const OpDef* def = find_op_def(name);
    if (def == nullptr) {  // a vendor op whose fragment was never defined
      plugin->violations.push_back("registers " + std::string(name) +
                                   ", which neither the registry nor its manifest's registry fragment defines");
      return;
    }
    const std::string op = def->id(), qualified = def->qualified_name();
    const std::string key_name = c10::toString(key);
    if (key_name != plugin->dispatch_key) {
      plugin->violations.push_back("registers " + qualified + " for " + key_name +
                                   ", but its manifest declares dispatch key " + plugin->dispatch_key);
      return;
    }
    if (std::find(plugin->ops.begin(), plugin->ops.end(), op) == plugin->ops.end()) {
      plugin->violations.push_back("registers " + qualified + ", which its manifest does not list");
      return;
    }
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
    choose(*slot);
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
      choose(*slot);
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
      if (!slot->offers.empty()) choose(*slot);
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
      auto found = std::find_if(held.begin(), held.end(), [&](const Held& h) { return h.token == token; });
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
    for (const auto& r : rules) file_rules_[{r.op, r.dispatch_key}] = r.buckets;
    file_path_ = path;
    choose_all();
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

  static std::string joined(const std::vector<std::string>& items, const char* sep) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
    return out;
  }

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
        const std::string where = "op '" + rule.op + "' on " + rule.dispatch_key + ", bucket " + std::to_string(i + 1) +
                                  ": '" + plugin + "'";
        if (std::find(loaded_.begin(), loaded_.end(), plugin) == loaded_.end())
          unloaded.push_back(where);
        else if (!offers(rule.op, rule.dispatch_key, plugin))
          not_offering.push_back(where);  // loaded, and has no kernel for this op on this key
      }
    if ((unloaded.empty() && not_offering.empty()) || (!strict && loaded_.empty())) return;
    const std::string loaded = loaded_.empty() ? "none" : joined(loaded_, ", ");
    std::string what = path + ":";
    if (!unloaded.empty()) what += " names plugins that are not loaded (loaded: " + loaded + "): " + joined(unloaded, "; ");
    if (!not_offering.empty())
      what += std::string(unloaded.empty() ? "" : ";") + " names loaded plugins that serve no kernel for that op there: " +
              joined(not_offering, "; ");
    if (strict)
      throw std::invalid_argument(what + " (strict: every plugin a selection file names must be loaded and serve the op)");
    TORCH_WARN("backplane: selection file ", what, "; calls of those sizes go to the plugin serving without the file");
  }

  // Whether `plugin` offered a kernel for op on the key named `key_name` ("CPU").
  bool offers(const std::string& op, const std::string& key_name, const std::string& plugin) const {
    for (const auto& [where, slot] : slots_)
      if (where.first == op && c10::toString(where.second) == key_name)
        return std::any_of(slot->offers.begin(), slot->offers.end(), [&](const Offer& o) { return o.plugin == plugin; });
    return false;
  }

  void choose_all() {
    for (auto& [_, slot] : slots_)
      if (!slot->offers.empty()) choose(*slot);
  }

  // Without a selection file: the op's own preference, then the one for every op ("*"),
  // then the plugin loaded first. A selection file's rule sits between the first two.
  void choose(Slot& slot) {
    auto offer_of = [&](const std::string& name) -> const Offer* {
      for (const auto& o : slot.offers)
        if (o.plugin == name) return &o;
      return nullptr;
    };
    auto pick = [&](const std::string& list_key) -> const Offer* {
      auto it = prefs_.find(list_key);
      if (it == prefs_.end()) return nullptr;
      for (const auto& name : it->second.back().plugins)
        if (const Offer* o = offer_of(name)) return o;
      return nullptr;
    };
    const Offer* own = pick(slot.op);
    const Offer* fallback = own;
    std::string fallback_why = "preferred for " + slot.op;
    if (!fallback) {
      fallback = pick("*");
      fallback_why = "preferred for every op (*)";
    }
    if (!fallback) {
      fallback = &slot.offers.front();
      fallback_why = slot.offers.size() == 1 ? "only offer" : "loaded first";
    }
    Choice choice;
    slot.buckets.clear();
    const auto rule = own ? file_rules_.end() : file_rules_.find({slot.op, c10::toString(slot.key)});
    if (rule == file_rules_.end()) {
      choice.by_size = {{std::numeric_limits<std::int64_t>::max(), &fallback->kernel}};
      slot.serving = fallback->plugin;
      slot.why = fallback_why;
    } else {
      slot.why = "selection file " + file_path_;
      std::int64_t from = 0;
      for (std::size_t i = 0; i < rule->second.size(); ++i) {
        const SizeBucket& bucket = rule->second[i];
        const Offer* offer = offer_of(bucket.plugin);
        const bool last = i + 1 == rule->second.size();
        slot.why += (i ? "; bucket " : ", bucket ") + std::to_string(i + 1) + " (" +
                    (last ? (i ? "more than " + std::to_string(from - 1) : std::string("every size"))
                          : std::to_string(from) + " to " + std::to_string(bucket.up_to)) +
                    " elements): " + (offer ? offer->plugin : fallback->plugin);
        if (!offer) {
          offer = fallback;
          slot.why += " ('" + bucket.plugin + "' does not serve it here; " + fallback_why + ")";
        }
        // Neighbouring buckets of one plugin are one range to the selector.
        if (!choice.by_size.empty() && choice.by_size.back().second == &offer->kernel) {
          choice.by_size.back().first = bucket.up_to;
          slot.buckets.back().up_to = bucket.up_to;
        } else {
          choice.by_size.push_back({bucket.up_to, &offer->kernel});
          slot.buckets.push_back({bucket.up_to, offer->plugin});
        }
        if (!last) from = bucket.up_to + 1;  // the last bucket's up_to is the largest int64
      }
      slot.serving = bucketed_serving(slot.buckets);
      if (slot.buckets.size() == 1) slot.buckets.clear();  // one plugin for every size: no split to report
    }
    auto found = std::find(slot.choices.begin(), slot.choices.end(), choice);
    if (found == slot.choices.end()) found = slot.choices.insert(slot.choices.end(), std::move(choice));
    slot.chosen.store(&*found, std::memory_order_release);
  }

  // "cpu_alt<=65536,cpu": each plugin with the largest size it takes; no spaces, so a
  // package's record (op dispatch_key plugin) keeps one word for it.
  static std::string bucketed_serving(const std::vector<SizeBucket>& buckets) {
    std::string out;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      out += (i ? "," : "") + buckets[i].plugin;
      if (i + 1 < buckets.size()) out += "<=" + std::to_string(buckets[i].up_to);
    }
    return out;
  }

  std::recursive_mutex mutex_;
  std::map<std::pair<std::string, c10::DispatchKey>, std::unique_ptr<Slot>> slots_;
  // One preference for an op: a hold's, or one set for good. Empty plugins: none.
  struct Held {
    std::uint64_t token;
    std::vector<std::string> plugins;
  };
  // Per op id ("*": every op), oldest first; the last is in force. Holds end in any order
  // (scopes on several threads), so each is found by its token, not by its place.
  std::map<std::string, std::vector<Held>> prefs_;
  std::uint64_t next_token_ = 1;
  // The selection file in force (selection_file.h): (op id, dispatch key) -> buckets.
  std::map<std::pair<std::string, std::string>, std::vector<SizeBucket>> file_rules_;
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

LoadingScope::LoadingScope(LoadingPlugin* plugin) : previous_(loading) { loading = plugin; }
LoadingScope::~LoadingScope() { loading = previous_; }

void after_plugin_loaded(const std::string& plugin) { Selection::get().after_load(plugin); }

void withdraw_offers(const std::string& plugin) { Selection::get().withdraw(plugin); }

}  // namespace detail

std::uint64_t hold_preference(const std::string& op, const std::vector<std::string>& plugins) {
  return Selection::get().hold(check_preference(op, plugins, "preference '" + op + ":" + join(plugins) + "'"), plugins);
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

void apply_selection_file(const std::string& path, bool strict) {
  Selection::get().set_file(path, read_selection_file(path), strict);
}

void clear_selection_file() { Selection::get().set_file("", {}, false); }

std::string selection_file() { return Selection::get().file(); }

}  // namespace backplane
