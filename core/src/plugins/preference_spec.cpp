// The preference grammar (preference_spec.h).
#include <backplane/loader.h>

#include "plugins/plugin_loading.h"
#include "plugins/preference_spec.h"
#include "util/strings.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace backplane::detail {

bool is_plugin_op_name(const std::string& op) {
  auto identifier = [](const std::string& s) {
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  };
  const auto sep = op.find("::");
  return sep != std::string::npos && identifier(op.substr(0, sep)) && identifier(op.substr(sep + 2));
}

std::string check_preference(const std::string& op, const std::vector<std::string>& plugins, const std::string& what) {
  std::string id = op;
  if (op != "*") {
    try {
      id = chosen_op_id(op);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(what + ": " + e.what());
    }
  }
  for (const auto& p : plugins)
    if (!is_valid_backend_name(p))
      throw std::invalid_argument(what + ": '" + p + "' is not a plugin name (a plain identifier)");
  return id;
}

std::map<std::string, std::vector<std::string>> parse_spec(const std::string& spec) {
  std::map<std::string, std::vector<std::string>> out;
  for (std::string part : split(spec, ';')) {
    part = trim(part);
    if (part.empty()) continue;
    const auto colon = part.rfind(':');  // ops may hold "::" (a plugin's own: acme::fused_gelu); plugins never do
    if (colon == std::string::npos)
      throw std::invalid_argument("preference '" + part + "': expected op:plugin[,plugin...], e.g. rms_norm:cuda_alt");
    const std::string op = trim(part.substr(0, colon));
    std::vector<std::string> plugins;
    for (const std::string& name : split(part.substr(colon + 1), ','))
      if (!trim(name).empty()) plugins.push_back(trim(name));
    const std::string id = check_preference(op, plugins, "preference '" + part + "'");
    if (plugins.empty()) throw std::invalid_argument("preference '" + part + "' names no plugin");
    out[id] = plugins;
  }
  return out;
}

std::string to_spec(const std::map<std::string, std::vector<std::string>>& prefs) {
  std::string out;
  for (const auto& [op, plugins] : prefs) {
    out += (out.empty() ? "" : ";") + op + ":" + join(plugins, ",");
  }
  return out;
}

}  // namespace backplane::detail
