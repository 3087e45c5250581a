// A row is timed only if its result is right: the op's output on the bench inputs is
// compared with its registry reference (evaluated in float64 on the CPU, as the
// conformance suite does) before any timing. A wrong kernel is reported, not timed.
#pragma once

#include <backplane/registry.h>

#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

namespace backplane::bench {

// nullopt when the op's result on `args` matches its reference (or the op has none);
// else what differs. Writing ops run on copies: `args` is left as it was.
std::optional<std::string> check_result(const OpDef& op, const std::vector<c10::IValue>& args);

}  // namespace backplane::bench
