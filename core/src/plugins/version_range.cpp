// Version ranges of triton-kind manifests (version_range.h). By hand rather than
// std::regex (plugin_search.cpp says why).
#include "plugins/version_range.h"

#include "util/strings.h"

#include <stdexcept>
#include <vector>

namespace backplane {
namespace {

struct Clause {
  std::string op;
  std::vector<long> version;
};

// strict (a range's version): one to three parts, each whole digits. Else (a module's
// __version__): the local part after '+' dropped, up to three parts, each its leading
// digits ("0a0" -> 0), stopping at a part without any. nullopt: not a version.
std::optional<std::vector<long>> components(const std::string& text, bool strict) {
  const std::vector<std::string> parts = detail::split(text.substr(0, text.find('+')), '.');
  if (strict && parts.size() > 3) return std::nullopt;
  std::vector<long> out;
  for (const std::string& part : parts) {
    if (out.size() == 3) break;
    size_t digits = 0;
    while (digits < part.size() && digits < 9 && part[digits] >= '0' && part[digits] <= '9') ++digits;
    if (strict && (digits == 0 || digits != part.size())) return std::nullopt;
    if (digits == 0) break;
    out.push_back(std::stol(part.substr(0, digits)));
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<std::vector<Clause>> parse(const std::string& range, std::string& why) {
  std::vector<Clause> clauses;
  for (const std::string& raw : detail::split(range, ',')) {
    const std::string clause = detail::trim(raw);
    Clause c;
    for (const char* op : {">=", "<=", "==", "!=", ">", "<"})
      if (clause.rfind(op, 0) == 0) {
        c.op = op;
        break;
      }
    const auto version = c.op.empty() ? std::nullopt : components(detail::trim(clause.substr(c.op.size())), true);
    if (!version) {
      why = "'" + clause + "' is not a clause such as >=2.11 (an operator >=, >, <=, <, == or != and a version of "
            "one to three whole numbers, clauses separated by ',')";
      return std::nullopt;
    }
    c.version = *version;
    clauses.push_back(std::move(c));
  }
  if (clauses.empty()) {
    why = "an empty range (write a clause such as >=2.11)";
    return std::nullopt;
  }
  return clauses;
}

// -1, 0, 1; a missing component counts as 0 ("2.14" == "2.14.0").
int compare(const std::vector<long>& a, const std::vector<long>& b) {
  for (size_t i = 0; i < 3; ++i) {
    const long x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

}  // namespace

std::optional<std::string> version_range_error(const std::string& range) {
  std::string why;
  if (!parse(range, why)) return why;
  return std::nullopt;
}

bool version_in_range(const std::string& version, const std::string& range) {
  std::string why;
  const auto clauses = parse(range, why);
  if (!clauses) throw std::invalid_argument("bad version range '" + range + "': " + why);
  const auto v = components(version, false);
  if (!v) return false;  // not a version at all: in no range
  for (const Clause& c : *clauses) {
    const int cmp = compare(*v, c.version);
    const bool ok = c.op == ">=" ? cmp >= 0 : c.op == ">" ? cmp > 0 : c.op == "<=" ? cmp <= 0 : c.op == "<" ? cmp < 0
                    : c.op == "==" ? cmp == 0 : cmp != 0;
    if (!ok) return false;
  }
  return true;
}

}  // namespace backplane
