// What a plugin's dlopen registered, read from the dispatcher itself. The only place that
// reads torch's text dump of an operator (OperatorHandle::dumpState), which is not a
// stable interface: when a torch release changes its wording, this file is what to fix.
// It is what catches registrations that bypass the core (a plain TORCH_LIBRARY_IMPL).
// Internal to the core.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace backplane::detail {

// Per op id, the dispatcher's account of it: one line per kernel ("KEY: registered at
// FILE:LINE ..."), with torch's " (inactive)" mark removed, so a kernel another one
// overrides reads the same before and after.
using DispatcherState = std::map<std::string, std::set<std::string>>;

// Every registry op's state now.
DispatcherState dispatcher_state();

// The ops a dlopen registered a kernel for on `key`, in registry order: those offered
// through the core, and those whose kernels for the key changed between the states. Not
// every kernel the key holds: that would credit a plugin with another's.
std::vector<std::string> registered_ops(const DispatcherState& before, const DispatcherState& after,
                                        const std::string& key, const std::vector<std::string>& offered);

// Each kernel registration added between the states outside `key` and `ops` (what a
// manifest declares), described with its key and where it was registered.
std::vector<std::string> undeclared_registrations(const DispatcherState& before, const DispatcherState& after,
                                                  const std::string& key, const std::vector<std::string>& ops);

}  // namespace backplane::detail
