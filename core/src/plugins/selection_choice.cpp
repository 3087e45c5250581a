// Which offer serves an (op, key): the order of rules in selection.h.
#include "plugins/selection_slot.h"
#include "util/strings.h"

#include <backplane/registry.h>

#include <algorithm>
#include <limits>

namespace backplane::detail {
namespace {

// "cpu_alt<=65536,cpu": each plugin with the largest size it takes; no spaces, so a
// package's record (op dispatch_key plugin) keeps one word for it.
std::string bucketed_serving(const std::vector<SizeBucket>& buckets) {
  std::string out;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    out += (i ? "," : "") + buckets[i].plugin;
    if (i + 1 < buckets.size()) out += "<=" + std::to_string(buckets[i].up_to);
  }
  return out;
}

}  // namespace

// Without a selection file: the op's own preference, then the one for every op ("*"),
// then the plugin loaded first. A selection file's rule sits between the first two.
void choose(Slot& slot, const HeldPreferences& prefs, const FileRules& file_rules, const std::string& file_path) {
  auto offer_of = [&](const std::string& name) -> const Offer* {
    for (const auto& o : slot.offers)
      if (o.plugin == name) return &o;
    return nullptr;
  };
  auto pick = [&](const std::string& list_key) -> const Offer* {
    auto it = prefs.find(list_key);
    if (it == prefs.end()) return nullptr;
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
  const auto rules = own ? file_rules.end() : file_rules.find({slot.op, c10::toString(slot.key)});
  if (rules == file_rules.end()) {
    choice.by_size = {{std::numeric_limits<std::int64_t>::max(), &fallback->kernel}};
    slot.serving = fallback->plugin;
    slot.why = fallback_why;
  } else {
    slot.why = "selection file " + file_path;
    std::vector<std::string> serving;  // per rule: "cpu_alt<=65536,cpu", "bfloat16:inductor"
    const bool by_dtype = rules->second.size() > 1 || !rules->second.front().dtype.empty();
    for (const SelectionRule& rule : rules->second) {
      BySize by_size;
      std::vector<SizeBucket> reported;
      std::int64_t from = 0;
      slot.why += rule.dtype.empty() ? (by_dtype ? std::string(", other dtypes:") : std::string(","))
                                     : ", " + rule.dtype + " calls:";
      for (std::size_t i = 0; i < rule.buckets.size(); ++i) {
        const SizeBucket& bucket = rule.buckets[i];
        const bool inductor = bucket.plugin == kInductor;
        const Offer* offer = inductor ? nullptr : offer_of(bucket.plugin);
        const bool last = i + 1 == rule.buckets.size();
        slot.why += (i ? "; bucket " : " bucket ") + std::to_string(i + 1) + " (" +
                    (last ? (i ? "more than " + std::to_string(from - 1) : std::string("every size"))
                          : std::to_string(from) + " to " + std::to_string(bucket.up_to)) +
                    " elements): ";
        if (inductor) {
          // Compiled code traces the reference in place of the call; an eager call has no
          // Inductor to run it, so the rule without the file serves it.
          offer = fallback;
          slot.why += std::string(kInductor) + " (compiled code; eager calls: " + fallback->plugin + ")";
        } else if (offer) {
          slot.why += offer->plugin;
        } else {
          offer = fallback;
          slot.why += fallback->plugin + " ('" + bucket.plugin + "' does not serve it here; " + fallback_why + ")";
        }
        const std::string name = inductor ? std::string(kInductor) : offer->plugin;
        // Neighbouring buckets of one kernel are one range to the selector, and of one name
        // one range to people.
        if (!by_size.empty() && by_size.back().second == &offer->kernel)
          by_size.back().first = bucket.up_to;
        else
          by_size.push_back({bucket.up_to, &offer->kernel});
        if (!reported.empty() && reported.back().plugin == name)
          reported.back().up_to = bucket.up_to;
        else
          reported.push_back({bucket.up_to, name, rule.dtype});
        if (!last) from = bucket.up_to + 1;  // the last bucket's up_to is the largest int64
      }
      serving.push_back((by_dtype ? (rule.dtype.empty() ? std::string("*") : rule.dtype) + ":" : std::string()) +
                        bucketed_serving(reported));
      slot.buckets.insert(slot.buckets.end(), reported.begin(), reported.end());
      if (rule.dtype.empty())
        choice.by_size = std::move(by_size);
      else
        choice.by_dtype.push_back({dtype_names().at(rule.dtype), std::move(by_size)});
    }
    if (choice.by_size.empty()) {  // only dtype rules: every other dtype as without the file
      choice.by_size = {{std::numeric_limits<std::int64_t>::max(), &fallback->kernel}};
      slot.why += ", other dtypes: " + fallback->plugin + " (" + fallback_why + ")";
      serving.push_back("*:" + fallback->plugin);
      slot.buckets.push_back({std::numeric_limits<std::int64_t>::max(), fallback->plugin, ""});
    }
    slot.serving = join(serving, ";");
    if (slot.buckets.size() == 1) slot.buckets.clear();  // one plugin for every call: no split to report
  }
  auto found = std::find(slot.choices.begin(), slot.choices.end(), choice);
  if (found == slot.choices.end()) found = slot.choices.insert(slot.choices.end(), std::move(choice));
  slot.chosen.store(&*found, std::memory_order_release);
}

}  // namespace backplane::detail
