// The coverage matrix: for each registry op, which backends implement it and for
// which dtypes.
#pragma once

#include <backplane/loader.h>

#include <string>
#include <vector>

namespace backplane {

struct CoverageCell {
  std::string backend;
  BackendStatus status;
  bool implemented = false;
  std::vector<std::string> dtypes;  // the registry's dtypes when implemented
};

struct OpCoverage {
  std::string op;
  std::string doc;
  std::vector<CoverageCell> backends;
};

BACKPLANE_API std::vector<OpCoverage> coverage(const std::vector<BackendRecord>& records);

}  // namespace backplane
