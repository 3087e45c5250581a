// An op's gradient cases: its `backward:` formulas against autograd through its reference.
#pragma once

#include <backplane/conformance.h>

#include <vector>

namespace backplane::conformance {

// Appends one "gradient/<sample>" case per registry sample of an op that has `backward:`
// formulas and a `reference:` (none otherwise). Throws std::invalid_argument when the
// reference does not parse.
void add_gradient_cases(const OpDef& op, std::vector<Case>& cases);

}  // namespace backplane::conformance
