// The backends a gtest suite runs on: $BACKPLANE_TEST_BACKENDS (a comma list; scripts/test.sh
// sets it to every plugin the build made), else cpu.
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace backplane::testing_support {

inline std::vector<std::string> test_backends() {
  const char* env = std::getenv("BACKPLANE_TEST_BACKENDS");
  std::stringstream in(env && *env ? env : "cpu");
  std::vector<std::string> out;
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) out.push_back(name);
  return out;
}

}  // namespace backplane::testing_support
