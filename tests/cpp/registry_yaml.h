// Registry YAML for parser tests: one valid op to break in one place, and the check
// that parsing it fails where and how a registry author should be told.
#pragma once

#include <backplane/registry.h>

#include <gtest/gtest.h>

#include <string>

namespace backplane {

// One valid op, to be broken in one place by each test.
inline std::string op_yaml(const std::string& schema = "twice(Tensor x) -> Tensor",
                           const std::string& dtypes = "[float32]", const std::string& shape = "{same_as: x}",
                           const std::string& extra = "") {
  return "ops:\n  - schema: " + schema + "\n    doc: Doubles x.\n    dtypes: " + dtypes + "\n    shape: " + shape +
         "\n" + extra;
}

inline void expect_error(const std::string& yaml, const std::string& where, const std::string& message) {
  try {
    parse_registry(yaml, "test.yaml");
    FAIL() << "expected an error '" << message << "' at " << where;
  } catch (const RegistryError& e) {
    EXPECT_EQ(e.where().str(), where) << e.what();
    EXPECT_NE(e.message().find(message), std::string::npos) << "message was: " << e.message();
    EXPECT_EQ(std::string(e.what()).rfind(where + ": ", 0), 0u) << e.what();
  }
}

}  // namespace backplane
