// The formulas of a registry document (reference, baseline, backward), checked once all
// its ops are parsed.
#pragma once

#include <backplane/registry.h>

#include <yaml-cpp/yaml.h>

#include <string>

namespace backplane::detail {

// `ops` is the document's `ops:` list and `doc` its parsed ops, in the same order; `text`
// the document (for the column of a formula's error). Throws RegistryError.
void check_formulas(const std::string& file, const std::string& text, const std::string& ns, const YAML::Node& ops,
                    const Registry& doc);

}  // namespace backplane::detail
