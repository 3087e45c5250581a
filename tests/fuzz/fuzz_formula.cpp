// libFuzzer: the formula grammar (reference_expr.h). Any text must parse or raise
// FormulaError, and a formula that parses must check against the dispatcher's schemas or
// raise FormulaError; a crash, hang, sanitizer report or other exception is a finding.
// Formulas are not evaluated: a fuzzed call could ask aten for a tensor of any size.
#include "formula/reference_expr.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using backplane::conformance::FormulaScope;
  // The names the seeds use, typed as an op's arguments and `grad` would be.
  static const FormulaScope scope = FormulaScope::dispatcher({{"x", c10::TensorType::get()},
                                                              {"grad", c10::TensorType::get()},
                                                              {"box", c10::ListType::ofInts()},
                                                              {"alpha", c10::NumberType::get()}});
  try {
    const auto formula = backplane::conformance::ReferenceExpr::parse(std::string(reinterpret_cast<const char*>(data), size));
    formula.names();
    formula.check(scope);
  } catch (const backplane::conformance::FormulaError&) {
  }
  return 0;
}
