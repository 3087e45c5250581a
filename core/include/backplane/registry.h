// The operator registry: what registry/*.yaml says, parsed and checked.
//
// The YAML is compiled into libbackplane_core at build time (and checked by the
// build, so a bad file fails the build with file:line:column). At run time the core
// defines every schema from it in the namespace's single TORCH_LIBRARY block.
#pragma once

#include <backplane/export.h>

#include <c10/core/ScalarType.h>

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

// The operator namespace: torch.ops.backplane.<op>. Fixed, because TORCH_LIBRARY
// blocks in plugins name it at compile time.
inline constexpr const char* kNamespace = "backplane";

struct BACKPLANE_API SourceLocation {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based; 0 when unknown
  std::string str() const;  // "file:line:column"
};

// A registry file that does not say what the core expects. what() is
// "file:line:column: message".
class BACKPLANE_API RegistryError : public std::runtime_error {
 public:
  RegistryError(SourceLocation where, const std::string& message);
  const SourceLocation& where() const { return where_; }
  const std::string& message() const { return message_; }

 private:
  SourceLocation where_;
  std::string message_;
};

enum class ShapeRuleKind { SameAs, Broadcast, InPlace, Out, Custom };

struct ShapeRule {
  ShapeRuleKind kind = ShapeRuleKind::SameAs;
  // Arguments the rule names, in the rule's order: SameAs {x}; Broadcast {a, b};
  // InPlace {x}; Out {out, like}; Custom {}. InPlace and Out ops return nothing,
  // and an Out op's out must already have the sizes of `like` (never resized).
  std::vector<std::string> args;
  std::string custom;  // Custom: the name of a rule in core/src/shape_rules/
};

struct BACKPLANE_API OpDef {
  std::string name;    // "add"
  std::string schema;  // as written, without the namespace
  std::string doc;
  std::vector<c10::ScalarType> dtypes;
  std::vector<std::string> arg_names;     // every argument, in schema order
  std::vector<std::string> tensor_args;   // the Tensor arguments, in schema order
  ShapeRule shape;
  SourceLocation where;

  // Index of an argument in schema order; -1 when there is none of that name.
  int arg_index(std::string_view arg) const;
  bool supports(c10::ScalarType dtype) const;
};

class BACKPLANE_API Registry {
 public:
  const std::vector<OpDef>& ops() const { return ops_; }
  const OpDef* find(std::string_view name) const;
  // Adds the ops of one parsed file; a name already present is an error naming both places.
  void merge(Registry&& other);
  void add(OpDef op);

 private:
  std::vector<OpDef> ops_;
};

// Parses one registry document. `file` names it in errors. Throws RegistryError.
BACKPLANE_API Registry parse_registry(const std::string& text, const std::string& file);

// The registry compiled into this library from registry/*.yaml.
BACKPLANE_API const Registry& registry();

// The registry's dtype names ("float32", "bfloat16", ...) and back.
BACKPLANE_API std::string dtype_name(c10::ScalarType dtype);
BACKPLANE_API const std::map<std::string, c10::ScalarType>& dtype_names();

}  // namespace backplane
