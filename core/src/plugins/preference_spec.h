// The preference grammar of BACKPLANE_PREFER, --prefer and set_preferences (selection.h):
// "op:plugin[,plugin...];..." with op a registry op, a plugin's own (acme::fused_gelu) or
// "*". Internal to the core.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace backplane::detail {

// "acme::fused_gelu": two identifiers.
bool is_plugin_op_name(const std::string& op);

// The op as preferences key it (chosen_op_id; "*" as is). Throws std::invalid_argument,
// `what` first, for an op the registry lacks, a name that is not an op name or a plugin
// name that is not a plain identifier.
std::string check_preference(const std::string& op, const std::vector<std::string>& plugins, const std::string& what);

// {op key: plugins} of a spec; throws std::invalid_argument naming the part at fault.
std::map<std::string, std::vector<std::string>> parse_spec(const std::string& spec);

// The spec of `prefs`, as parse_spec reads it back.
std::string to_spec(const std::map<std::string, std::vector<std::string>>& prefs);

}  // namespace backplane::detail
