// Backend lists as --backends and BACKPLANE_BACKENDS give them (backend_names in loader.h).
#include <backplane/loader.h>

#include "util/strings.h"

#include <algorithm>
#include <stdexcept>

namespace backplane {

std::vector<std::string> backend_names(const std::string& value, const std::string& what, const std::string& unset) {
  std::vector<std::string> names;
  for (const std::string& item : detail::split(value, ',')) names.push_back(detail::trim(item));
  const std::string expected = "expected backend names separated by ',' ('none' loads none" + unset + ")";
  if (std::all_of(names.begin(), names.end(), [](const std::string& n) { return n.empty(); }))
    throw std::invalid_argument(what + " names no backend: " + expected);
  if (std::count(names.begin(), names.end(), ""))
    throw std::invalid_argument(what + " has an empty entry: " + expected);
  if (names.size() > 1 && std::count(names.begin(), names.end(), "none"))
    throw std::invalid_argument(what + ": 'none' loads no backend, so it stands alone");
  return names;
}

std::vector<std::string> backend_names_from_environment(const std::string& value) {
  return backend_names(value, "BACKPLANE_BACKENDS='" + value + "'", "; unset it to load every plugin found");
}

}  // namespace backplane
