// Which offer serves an (op, key): the order of rules in selection.h.
#include "plugins/selection_slot.h"

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
  const auto rule = own ? file_rules.end() : file_rules.find({slot.op, c10::toString(slot.key)});
  if (rule == file_rules.end()) {
    choice.by_size = {{std::numeric_limits<std::int64_t>::max(), &fallback->kernel}};
    slot.serving = fallback->plugin;
    slot.why = fallback_why;
  } else {
    slot.why = "selection file " + file_path;
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

}  // namespace backplane::detail
