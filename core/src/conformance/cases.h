// An op's conformance cases, derived from its registry entry.
#pragma once

#include <backplane/conformance.h>

namespace backplane::conformance {

// Samples x layouts against the reference, the contract's errors, the entry's errors.
// Throws std::invalid_argument when the entry's reference does not parse.
OpSuite derive_suite(const OpDef& op);

}  // namespace backplane::conformance
