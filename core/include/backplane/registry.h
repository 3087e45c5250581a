// The operator registry: what registry/*.yaml says, parsed and checked.
//
// The YAML is compiled into libbackplane_core at build time (and checked by the
// build, so a bad file fails the build with file:line:column). At run time the core
// defines every schema from it in the namespace's single TORCH_LIBRARY block.
#pragma once

#include <backplane/export.h>

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <functional>
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
  // Arguments the rule names, in the rule's order: SameAs {x}; Broadcast {a, b, ...};
  // InPlace {x}; Out {out, like}; Custom {} or {layout source} (`layout: x`: the output is
  // laid out as x where x is a dense permutation of its sizes). InPlace and Out ops return
  // nothing, and an Out op's out must already have the sizes of `like` (never resized).
  std::vector<std::string> args;
  std::string custom;  // Custom: the name of a rule in core/src/define/shape_rules/
};

// One set of inputs for an op, as the registry writes it: each Tensor argument by its
// sizes (an int list), any other argument by its value (a str argument by its string).
// Arguments left out take the schema's default.
struct BACKPLANE_API OpInputs {
  std::string name;  // as written, or "sizes a=[4, 33] b=[33]" when unnamed
  std::vector<std::pair<std::string, c10::IValue>> args;
  // Samples only (`magnitude:`): every Tensor argument is drawn as usual, N(0, 1), then
  // multiplied by this (in float64, before rounding to the dtype), so a sample can reach
  // values where a half-precision computation overflows (rms_norm's x*x above ~256).
  double magnitude = 1.0;
  // Bench presets only: the layout every Tensor argument is made in, one of the
  // conformance suite's (strided, transposed, offset, expanded, permuted); empty: contiguous.
  std::string layout;
  SourceLocation where;
  const c10::IValue* find(std::string_view arg) const;
};

// Inputs an op must refuse, and a part of the message it must give.
struct BACKPLANE_API OpErrorCase {
  OpInputs inputs;
  std::string message;
};

// How the conformance suite and the benchmarks exercise an op; all of it optional.
struct BACKPLANE_API OpChecks {
  // A call of PyTorch ops over the op's arguments giving the expected result (for ops
  // that write an argument: its expected new value), e.g. "aten::add.Tensor(a, b,
  // alpha=alpha)". Evaluated on the CPU in float64, then rounded to the dtype. Empty:
  // the op is checked against its contract only.
  std::string reference;
  SourceLocation reference_where;
  // What `backplane bench` times beside the op as PyTorch's own (same grammar): PyTorch's
  // fused op where there is one (aten::rms_norm for rms_norm). Empty: the reference.
  std::string baseline;
  SourceLocation baseline_where;
  const std::string& bench_baseline() const { return baseline.empty() ? reference : baseline; }
  bool exact = false;  // bitwise equal to the reference rounded to the dtype
  std::map<c10::ScalarType, std::pair<double, double>> tolerance;  // (rtol, atol) per dtype, over the defaults
  std::vector<OpInputs> samples;    // each checked in every layout and dtype
  std::vector<OpErrorCase> errors;  // inputs the op must refuse
  std::vector<OpInputs> bench;      // shapes for `backplane bench`
  // `flops:` the floating-point operations per element of the op's largest Tensor
  // argument, from its reference formula (registry/ops.yaml's header says how they are
  // counted): the bench's %peak column. 0: not given, and the column is blank.
  double flops_per_element = 0;
};

// One entry of `backward:`: the gradient of one Tensor argument, or of several at once.
struct GradientFormula {
  // A call in the `reference` grammar over the op's arguments, `grad` and `result`.
  std::string formula;
  // The key named several arguments ("x, weight"): the call returns one gradient per
  // argument, in the key's order (a backward op such as rms_norm_backward computing
  // dx and dweight in one pass), and this argument's is return value `output`.
  // A key naming one argument: its gradient is the call's (first) value; output 0.
  size_t output = 0;
  size_t outputs = 1;  // how many arguments the key named
  SourceLocation where;  // the formula's place in its registry file, for messages about it
};

// How an op runs under torch.autocast (`autocast:` in the registry; autocast_kernel.cpp):
// the dtype its floating Tensor inputs on the autocast device are cast to first. float64
// inputs are never cast, as PyTorch's autocast leaves them. An op that writes an argument
// is never autocast itself: the written tensor keeps its dtype and the op's other
// floating inputs are cast to it (so the registry refuses the key on such ops).
enum class AutocastRule {
  Promote,  // the widest floating input dtype (the default): inputs that agree are left alone
  Fp32,     // float32: reductions, norms, softmax
  Lower,    // the autocast dtype (torch.get_autocast_dtype): matmuls, convolutions
};

// How DTensor shards the op (`sharding:` in the registry; python/backplane/sharding/
// turns it into a strategy per op, docs/distributed.md). Derived, when the key is absent:
// ops whose shape is elementwise (same_as, broadcast, in_place, out) and whose reference
// calls only pointwise PyTorch ops are pointwise; any other op refuses DTensor inputs
// with a message naming the key.
enum class ShardingKind {
  Derived,    // no `sharding:` key
  Pointwise,  // each output element reads only the same (broadcast) element of each input
  Mixes,      // the op reads across its inputs' last `mixes` dimensions (a norm, softmax)
  Replicate,  // only replicated inputs: DTensor gathers sharded ones first (a collective)
  None,       // DTensor inputs are refused
};

struct ShardingRule {
  ShardingKind kind = ShardingKind::Derived;
  int mixes = 0;  // Mixes: how many trailing dimensions are read across, >= 1
  // Mixes: outputs (by index) that sum over the leading dimensions they lack, as
  // rms_norm_backward's dweight sums over the rows: Partial(sum) when one of those is
  // sharded. Any other output must have every sharded dimension.
  std::vector<int> summed;
  SourceLocation where;
};

struct BACKPLANE_API OpDef {
  std::string ns = kNamespace;  // "backplane"; a plugin's own ops: its fragment's namespace ("acme")
  std::string name;    // "add"
  std::string schema;  // as written, without the namespace
  std::string doc;
  std::vector<c10::ScalarType> dtypes;
  // `choices:`: the values a str argument may take ({approximate: [none, tanh]}). The op
  // contract refuses any other value on every backend and under FakeTensor, so no kernel
  // checks it by hand. Arguments not named here take any string.
  std::map<std::string, std::vector<std::string>> choices;
  std::vector<std::string> arg_names;     // every argument, in schema order
  std::vector<std::string> tensor_args;   // the Tensor arguments, in schema order
  std::vector<c10::Argument> arguments;  // the parsed schema's arguments
  ShapeRule shape;  // of the (first) output, or of the argument the op writes
  // Ops returning several tensors: the rules of outputs 1, 2, ... (`shape:` is then a
  // list with one rule per return value). Empty for every other op.
  std::vector<ShapeRule> extra_outputs;
  OpChecks checks;
  // `backward:`: for each differentiable Tensor argument, its gradient as a call of
  // PyTorch ops or registry ops (the `reference` grammar) over the op's arguments,
  // `grad` (the incoming gradient) and `result` (the op's output), e.g. {a: grad, b:
  // "aten::mul.Tensor(grad, a)"}, or one call for several arguments ({"x, weight":
  // "backplane::rms_norm_backward(grad, x, weight, eps)"}). The core sums each to its
  // input's size (broadcasting). Empty: no derivative, and backward through the op is
  // an error naming it.
  std::map<std::string, GradientFormula> backward;
  AutocastRule autocast = AutocastRule::Promote;
  ShardingRule sharding;
  SourceLocation where;

  // Index of an argument in schema order; -1 when there is none of that name.
  int arg_index(std::string_view arg) const;
  // Whether the op writes an argument (in_place and out rules) rather than returning
  // new tensors.
  bool writes() const { return shape.kind == ShapeRuleKind::InPlace || shape.kind == ShapeRuleKind::Out; }
  // How many new tensors the op returns: 0 for an op that writes, else 1 + extra_outputs.
  size_t new_outputs() const { return writes() ? 0 : 1 + extra_outputs.size(); }
  bool supports(c10::ScalarType dtype) const;
  // How the op is named everywhere Backplane keys by op (manifests, preferences, the CLI,
  // check results): "add" for the core's ops, "acme::fused_gelu" for a plugin's own.
  std::string id() const;
  std::string qualified_name() const;  // "backplane::add", "acme::fused_gelu"
};

// A custom class (torchbind): torch.classes.backplane.<name>. Its state is its
// constructor's arguments, and each method either calls a registry op with the
// method's arguments (so it runs on the backend of its tensors) or returns one
// state field. That closed set is what lets the core register the class and the
// Python package make its fake class from the same YAML, with no hand-written code.
struct BACKPLANE_API MethodDef {
  enum class Kind { CallsOp, ReturnsField };
  std::string name;    // "forward"
  std::string schema;  // as written, without self: "forward(Tensor x) -> Tensor"
  std::string doc;
  Kind kind = Kind::CallsOp;
  std::string target;  // the op (CallsOp) or the state field (ReturnsField)
  SourceLocation where;
};

struct BACKPLANE_API ClassField {
  std::string name;
  std::string type;  // int, float, bool or str
};

struct BACKPLANE_API ClassDef {
  std::string name;  // "IdentityConv"
  std::string doc;
  std::string init;  // the constructor's arguments as written: "(int channels)"
  std::vector<ClassField> state;  // the constructor's arguments, in order
  std::vector<MethodDef> methods;
  SourceLocation where;

  const ClassField* field(std::string_view name) const;
};

class BACKPLANE_API Registry {
 public:
  const std::vector<OpDef>& ops() const { return ops_; }
  const std::vector<ClassDef>& classes() const { return classes_; }
  const OpDef* find(std::string_view name) const;
  const ClassDef* find_class(std::string_view name) const;
  // Adds the ops and classes of one parsed file; a name already present is an error
  // naming both places.
  void merge(Registry&& other);
  void add(OpDef op);
  void add_class(ClassDef cls);
  // Cross-file checks, once every file is merged: each method that calls an op names
  // an op of the registry with the same argument and return types.
  void check_classes() const;

 private:
  std::vector<OpDef> ops_;
  std::vector<ClassDef> classes_;
};

// Parses one registry document (ops and classes; check_classes() needs the merged
// registry). `file` names it in errors. Throws RegistryError. A document may name its
// namespace (top-level `namespace:`); without one its ops are backplane's.
BACKPLANE_API Registry parse_registry(const std::string& text, const std::string& file);

// The registry compiled into this library from registry/*.yaml: the backplane:: ops.
BACKPLANE_API const Registry& registry();

// Every op this process knows: the core registry's, then the ops of the registry
// fragments that loaded plugins brought (vendor_ops.h), in load order. A snapshot: ops a
// later load adds are not in it. The references stay valid for the life of the process.
BACKPLANE_API std::vector<std::reference_wrapper<const OpDef>> all_ops();
// The op named `name`: an id ("add", "acme::fused_gelu") or "backplane::add"; nullptr
// when neither the core registry nor a loaded plugin's fragment defines it.
BACKPLANE_API const OpDef* find_op_def(std::string_view name);

// The registry's dtype names ("float32", "bfloat16", ...) and back.
BACKPLANE_API std::string dtype_name(c10::ScalarType dtype);
BACKPLANE_API const std::map<std::string, c10::ScalarType>& dtype_names();

}  // namespace backplane
