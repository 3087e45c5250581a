// Parses a registry YAML document into OpDefs and ClassDefs: its namespace, its `ops:`
// (op_parse.cpp; their formulas: document_formulas.cpp) and its `classes:` (class_parse.cpp).
// Every error names file:line:column and says what was expected and what was found.
#include <backplane/registry.h>

#include "registry/document_formulas.h"
#include "registry/op_parse.h"
#include "registry/reserved_names.h"
#include "registry/yaml_location.h"
#include "registry/yaml_strict.h"

#include <yaml-cpp/yaml.h>

#include <cctype>

namespace backplane {

using detail::at;
using detail::kind_name;

Registry parse_registry(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw RegistryError({file, e.mark.line + 1, e.mark.column + 1}, "invalid YAML: " + e.msg);
  }
  if (auto problem = detail::find_duplicate_key(root)) throw RegistryError(at(file, problem->node), problem->message);
  if (!root.IsMap())
    throw RegistryError(at(file, root), std::string("expected a mapping with an 'ops' or 'classes' list at the top, found ") +
                                            kind_name(root));
  for (const auto& entry : root) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
    if (key != "ops" && key != "classes" && key != "namespace")
      throw RegistryError(at(file, entry.first), "unknown top-level key '" + key + "'; expected: namespace, ops, classes");
  }
  std::string ns = kNamespace;
  if (const YAML::Node given = root["namespace"]) {
    ns = given.IsScalar() ? given.Scalar() : "";
    bool identifier = !ns.empty() && (std::islower(static_cast<unsigned char>(ns[0])) || ns[0] == '_');
    for (char c : ns)
      identifier = identifier && (std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_');
    if (!identifier)
      throw RegistryError(at(file, given), "namespace '" + ns + "' should be a lower-case identifier such as acme " +
                                               "([a-z_][a-z0-9_]*), found " + (given.IsScalar() ? "'" + ns + "'" : kind_name(given)));
    if (const std::string why = detail::reserved_namespace(ns); !why.empty())
      throw RegistryError(at(file, given), "namespace '" + ns + "' " + why + "; give your ops a namespace of your own");
  }
  Registry out;
  const YAML::Node ops = root["ops"];
  const YAML::Node classes = root["classes"];
  if (!ops && !classes) throw RegistryError(at(file, root), "expected a top-level 'ops' or 'classes' list, found neither");
  if (ops) {
    if (!ops.IsSequence())
      throw RegistryError(at(file, ops), std::string("expected 'ops' to be a list, found ") + kind_name(ops));
    for (const auto& node : ops) {
      OpDef op = detail::parse_op(file, node);
      op.ns = ns;
      out.add(std::move(op));
    }
    detail::check_formulas(file, text, ns, ops, out);
  }
  if (classes) {
    if (!classes.IsSequence())
      throw RegistryError(at(file, classes), std::string("expected 'classes' to be a list, found ") + kind_name(classes));
    for (const auto& node : classes) out.add_class(detail::parse_class(file, node));
  }
  return out;
}

}  // namespace backplane
