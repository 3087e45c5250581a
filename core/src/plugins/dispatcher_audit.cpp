// Reading the dispatcher's dump (dispatcher_audit.h).
#include "plugins/dispatcher_audit.h"

#include <backplane/registry.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <sstream>

namespace backplane::detail {
namespace {

// The dispatch key a dumpState line is about; empty for lines that are not a kernel's.
std::string line_key(const std::string& line) {
  const auto colon = line.find(':');
  if (colon == std::string::npos) return "";
  std::string key = line.substr(0, colon);
  if (key.size() > 7 && key.compare(key.size() - 7, 7, "[alias]") == 0) key.resize(key.size() - 7);
  if (key == "name" || key == "schema" || key == "debug" || key == "alias analysis kind") return "";
  return key;
}

std::set<std::string> kernel_lines(const DispatcherState& state, const std::string& op, const std::string& key) {
  std::set<std::string> lines;
  if (auto found = state.find(op); found != state.end())
    for (const auto& line : found->second)
      if (line_key(line) == key) lines.insert(line);
  return lines;
}

}  // namespace

DispatcherState dispatcher_state() {
  DispatcherState state;
  for (const OpDef& op : all_ops()) {
    auto handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(op.qualified_name(), ""));
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

std::vector<std::string> registered_ops(const DispatcherState& before, const DispatcherState& after,
                                        const std::string& key, const std::vector<std::string>& offered) {
  std::vector<std::string> ops;
  for (const OpDef& op : all_ops()) {
    const std::string id = op.id();
    if (std::count(offered.begin(), offered.end(), id) || kernel_lines(after, id, key) != kernel_lines(before, id, key))
      ops.push_back(id);
  }
  return ops;
}

std::vector<std::string> undeclared_registrations(const DispatcherState& before, const DispatcherState& after,
                                                  const std::string& key, const std::vector<std::string>& ops) {
  std::vector<std::string> found;
  for (const auto& [op, lines] : after) {
    auto was = before.find(op);
    for (const auto& line : lines) {
      if (was != before.end() && was->second.count(line)) continue;
      const std::string line_of = line_key(line);
      if (line_of.empty()) continue;
      const bool declared = line_of == key && std::count(ops.begin(), ops.end(), op);
      if (declared) continue;
      const auto at = line.find("registered at ");
      const std::string where = at == std::string::npos ? "" : " (" + line.substr(at, line.find(" ::", at) - at) + ")";
      found.push_back("registered a " + line_of + " kernel for " + find_op_def(op)->qualified_name() + where);
    }
  }
  return found;
}

}  // namespace backplane::detail
