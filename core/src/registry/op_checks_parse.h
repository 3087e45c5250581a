// The optional test-and-benchmark keys of a registry op (reference, exact, tolerance,
// samples, errors, bench): what the conformance suite and `backplane bench` derive
// their cases from.
#pragma once

#include <backplane/registry.h>

#include <yaml-cpp/yaml.h>

namespace backplane::detail {

inline constexpr const char* kOpCheckKeys[] = {"reference", "baseline", "exact", "tolerance", "samples", "errors", "bench", "flops"};

// Fills op.checks from the op's node; op's schema, dtypes and shape rule are parsed
// already. Ops with an elementwise shape rule and no samples get default samples.
// Throws RegistryError at the offending node.
void parse_op_checks(const std::string& file, const YAML::Node& node, OpDef& op);

}  // namespace backplane::detail
