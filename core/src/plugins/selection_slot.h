// What per-op selection keeps for each (op, dispatch key) that plugins offer, and the
// kernel the dispatcher reaches once two plugins offer one (the contract in selection.h;
// the state and its lock in selection.cpp, the choice in selection_choice.cpp).
#pragma once

#include <backplane/selection.h>
#include <backplane/selection_file.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace backplane::detail {

struct Offer {
  std::string plugin;
  c10::KernelFunction kernel;
};

// One kernel per size bucket of a selection file (ascending up_to; the last takes every
// larger call), or one for every size.
using BySize = std::vector<std::pair<std::int64_t, const c10::KernelFunction*>>;

// What the selector calls: by the call's dtype where a selection file keys the op by
// dtype, then by its size.
struct Choice {
  BySize by_size;  // every dtype by_dtype does not name
  std::vector<std::pair<c10::ScalarType, BySize>> by_dtype;
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
  // A selection file's split, neighbours of one plugin merged, tagged with the dtype they are
  // for (empty: every dtype not named); empty when one plugin serves every call.
  std::vector<SizeBucket> buckets;
  std::unique_ptr<torch::Library> selector;  // once two plugins offer this (op, key)
  bool warned = false;
};

// The kernel the dispatcher reaches for an (op, key) two plugins offer: calls the
// chosen plugin's kernel, by the call's size where a selection file splits it.
class Selector final : public c10::OperatorKernel {
 public:
  explicit Selector(const Slot* slot) : slot_(slot) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);

 private:
  const Slot* slot_;
};

// One preference for an op: a hold's, or one set for good. Empty plugins: none.
struct HeldPreference {
  std::uint64_t token;
  std::vector<std::string> plugins;
};
// Per op id ("*": every op), oldest first; the last is in force.
using HeldPreferences = std::map<std::string, std::vector<HeldPreference>>;
// The selection file in force (selection_file.h): (op id, dispatch key) -> its rules, one
// per dtype named (SelectionRule::dtype; empty: every other dtype).
using FileRules = std::map<std::pair<std::string, std::string>, std::vector<SelectionRule>>;

// Sets slot.chosen, serving, why and buckets from the preferences and the selection file
// in force (the order of rules: selection.h). Called under selection.cpp's lock.
void choose(Slot& slot, const HeldPreferences& prefs, const FileRules& file_rules, const std::string& file_path);

}  // namespace backplane::detail
