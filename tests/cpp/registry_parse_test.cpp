// The registry parser: the shipped registry, and every error a registry author can
// make, each with its file:line:column and message.
#include <backplane/registry.h>

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

namespace backplane {
namespace {

// One valid op, to be broken in one place by each test.
std::string op_yaml(const std::string& schema = "twice(Tensor x) -> Tensor",
                    const std::string& dtypes = "[float32]", const std::string& shape = "{same_as: x}",
                    const std::string& extra = "") {
  return "ops:\n  - schema: " + schema + "\n    doc: Doubles x.\n    dtypes: " + dtypes + "\n    shape: " + shape +
         "\n" + extra;
}

void expect_error(const std::string& yaml, const std::string& where, const std::string& message) {
  try {
    parse_registry(yaml, "test.yaml");
    FAIL() << "expected an error '" << message << "' at " << where;
  } catch (const RegistryError& e) {
    EXPECT_EQ(e.where().str(), where) << e.what();
    EXPECT_NE(e.message().find(message), std::string::npos) << "message was: " << e.message();
    EXPECT_EQ(std::string(e.what()).rfind(where + ": ", 0), 0u) << e.what();
  }
}

// The registry compiled into the core is the one in registry/ (no list of ops here:
// the YAML is the only one).
TEST(Registry, CompiledRegistryIsTheYamlFile) {
  std::ifstream in(std::string(BACKPLANE_SOURCE_DIR) + "/registry/ops.yaml");
  ASSERT_TRUE(in) << "cannot read registry/ops.yaml";
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Registry from_file = parse_registry(text, "registry/ops.yaml");
  std::vector<std::string> compiled, parsed;
  for (const auto& op : registry().ops())
    if (op.where.file == "registry/ops.yaml") compiled.push_back(op.name);
  for (const auto& op : from_file.ops()) parsed.push_back(op.name);
  EXPECT_EQ(compiled, parsed);
}

TEST(Registry, ShippedRegistryParsesAdd) {
  const Registry& r = registry();
  const OpDef* add = r.find("add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->shape.kind, ShapeRuleKind::Broadcast);
  EXPECT_EQ(add->shape.args, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(add->tensor_args, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(add->arg_names, (std::vector<std::string>{"a", "b", "alpha"}));
  EXPECT_EQ(add->dtypes, (std::vector<c10::ScalarType>{c10::kFloat, c10::kDouble, c10::kHalf, c10::kBFloat16}));
  EXPECT_EQ(r.find("scale_")->shape.kind, ShapeRuleKind::InPlace);
  EXPECT_EQ(r.find("sin_out")->shape.kind, ShapeRuleKind::Out);
  EXPECT_EQ(r.find("crop")->shape.custom, "crop");
  EXPECT_EQ(r.find("add")->where.file, "registry/ops.yaml");
}

TEST(Registry, ParsesAValidOp) {
  Registry r = parse_registry(op_yaml(), "test.yaml");
  ASSERT_EQ(r.ops().size(), 1u);
  EXPECT_EQ(r.ops()[0].name, "twice");
  EXPECT_EQ(r.ops()[0].where.str(), "test.yaml:2:5");
}

TEST(RegistryErrors, InvalidYaml) { expect_error("ops: [\n", "test.yaml:2:1", "invalid YAML"); }

TEST(RegistryErrors, TopLevelNotAMapping) {
  expect_error("- a\n- b\n", "test.yaml:1:1", "expected a mapping with an 'ops' or 'classes' list at the top, found a list");
}

TEST(RegistryErrors, BenchPresetLayouts) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}",
                       "    bench:\n      - {x: [8, 8], layout: sideways}\n"),
               "test.yaml:7:29",
               "a bench preset's layout is one of: strided, transposed, offset, expanded, permuted (contiguous is "
               "the default); found 'sideways'");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}",
                       "    bench:\n      - {name: flat, x: [8], layout: transposed}\n"),
               "test.yaml:7:9", "bench preset 'flat': argument 'x' has 1 dimension(s), too few for layout 'transposed'");
  const Registry r = parse_registry(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}",
                                            "    bench:\n      - {name: t, x: [8, 8], layout: transposed}\n"),
                                    "test.yaml");
  EXPECT_EQ(r.ops()[0].checks.bench.at(0).layout, "transposed");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}",
                       "    bench:\n      - {name: square, x: [8, 8], layout: permuted}\n"),
               "test.yaml:7:9",
               "bench preset 'square': argument 'x' has 2 dimension(s), too few for layout 'permuted'");
}

TEST(RegistryErrors, UnknownTopLevelKey) {
  expect_error("ops: []\nopz: []\n", "test.yaml:2:1", "unknown top-level key 'opz'; expected: namespace, ops, classes");
}

TEST(RegistryErrors, BadSchema) {
  expect_error(op_yaml("twice(Tensor x -> Tensor"), "test.yaml:2:13", "bad schema 'twice(Tensor x -> Tensor'");
}

TEST(RegistryErrors, UnknownTypeInSchema) {
  expect_error(op_yaml("twice(Tensr x) -> Tensor"), "test.yaml:2:13", "bad schema 'twice(Tensr x) -> Tensor'");
}

TEST(RegistryErrors, SchemaWithNamespace) {
  expect_error(op_yaml("other::twice(Tensor x) -> Tensor"), "test.yaml:2:13",
               "names a namespace; write it without one");
}

TEST(RegistryErrors, SchemaWithOverload) {
  expect_error(op_yaml("twice.fast(Tensor x) -> Tensor"), "test.yaml:2:13", "has an overload name ('fast')");
}

TEST(RegistryErrors, UnknownDtype) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32, float8]"), "test.yaml:4:23",
               "unknown dtype 'float8'; expected one of: bfloat16, bool,");
}

TEST(RegistryErrors, DtypeListedTwice) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32, float32]"), "test.yaml:4:23",
               "dtype 'float32' is listed twice");
}

TEST(RegistryErrors, DtypesNotAList) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "float32"), "test.yaml:4:13",
               "expected a list of dtypes such as [float32, bfloat16], found a scalar");
}

TEST(RegistryErrors, MissingKey) {
  expect_error("ops:\n  - schema: twice(Tensor x) -> Tensor\n    dtypes: [float32]\n    shape: {same_as: x}\n",
               "test.yaml:2:5", "op 'twice' is missing required key 'doc'");
}

TEST(RegistryErrors, UnknownKey) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    dtype: [float32]\n"),
               "test.yaml:6:5", "unknown key 'dtype'; expected one of: backward, baseline, bench, doc, dtypes, errors, exact, reference, samples, schema, shape, tolerance");
}

TEST(RegistryErrors, ReservedKey) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    backends: [cpu]\n"),
               "test.yaml:6:5", "key 'backends' is reserved for later work");
}

TEST(Registry, BackwardFormulasPerTensorArgument) {
  Registry r = parse_registry(op_yaml("twice(Tensor x, float s=2.0) -> Tensor", "[float32]", "{same_as: x}",
                                      "    backward: {x: \"aten::mul.Scalar(grad, 2)\"}\n"),
                              "test.yaml");
  EXPECT_EQ(r.ops()[0].backward.at("x").formula, "aten::mul.Scalar(grad, 2)");
}

// One call giving several arguments' gradients: a backward op returning both.
TEST(Registry, BackwardKeyNamingSeveralArguments) {
  Registry r = parse_registry(
      op_yaml("prod(Tensor a, Tensor b) -> Tensor", "[float32]", "{broadcast: [a, b]}",
              "    backward: {\"a, b\": \"backplane::prod_backward(grad, a, b)\"}\n"),
      "test.yaml");
  const OpDef& op = r.ops()[0];
  EXPECT_EQ(op.backward.at("a").formula, "backplane::prod_backward(grad, a, b)");
  EXPECT_EQ(op.backward.at("a").output, 0u);
  EXPECT_EQ(op.backward.at("b").output, 1u);
  EXPECT_EQ(op.backward.at("b").outputs, 2u);
}

TEST(RegistryErrors, BackwardKeyNamesAnArgumentTwice) {
  expect_error(op_yaml("prod(Tensor a, Tensor b) -> Tensor", "[float32]", "{broadcast: [a, b]}",
                       "    backward: {\"a, b\": \"aten::mul.Tensor(grad, b)\", b: grad}\n"),
               "test.yaml:6:53", "backward of 'prod' gives 'b' a gradient twice");
  expect_error(op_yaml("prod(Tensor a, Tensor b) -> Tensor", "[float32]", "{broadcast: [a, b]}",
                       "    backward: {\"a,\": grad}\n"),
               "test.yaml:6:16", "backward of 'prod' has an empty key");
}

// An op returning two tensors: `shape:` lists one rule per output.
TEST(Registry, OneShapeRulePerOutput) {
  Registry r = parse_registry(op_yaml("split2(Tensor x, Tensor w) -> (Tensor, Tensor)", "[float32]",
                                      "[{same_as: x}, {same_as: w}]", "    samples: [{x: [2, 3], w: [3]}]\n"),
                              "test.yaml");
  const OpDef& op = r.ops()[0];
  EXPECT_EQ(op.new_outputs(), 2u);
  ASSERT_EQ(op.extra_outputs.size(), 1u);
  EXPECT_EQ(op.extra_outputs[0].args, std::vector<std::string>{"w"});
}

TEST(RegistryErrors, OutputRulesMustMatchTheReturns) {
  expect_error(op_yaml("split2(Tensor x, Tensor w) -> Tensor", "[float32]", "[{same_as: x}, {same_as: w}]"),
               "test.yaml:5:12", "shape of 'split2' gives 2 output(s); the schema must return exactly 2 Tensors");
  expect_error(op_yaml("split2(Tensor x, Tensor w) -> (Tensor, Tensor)", "[float32]", "{same_as: x}"),
               "test.yaml:5:12", "shape of 'split2' gives 1 output(s); the schema must return exactly one Tensor");
  expect_error(op_yaml("split1(Tensor x) -> Tensor", "[float32]", "[{same_as: x}]"), "test.yaml:5:12",
               "shape of 'split1' is a list of 1 rule(s)");
  expect_error(op_yaml("split2_(Tensor(a!) x, Tensor w) -> (Tensor, Tensor)", "[float32]", "[{in_place: x}, {same_as: w}]"),
               "test.yaml:5:13", "output 0 of 'split2_': an op returning several tensors writes no argument");
}

TEST(RegistryErrors, BackwardMustNameTensorArgumentsAndParse) {
  expect_error(op_yaml("twice(Tensor x, float s=2.0) -> Tensor", "[float32]", "{same_as: x}", "    backward: {s: grad}\n"),
               "test.yaml:6:16", "backward of 'twice' names 's', which is not a Tensor argument; expected one of: x");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    backward: {x: \"aten::mul(grad\"}\n"),
               "test.yaml:6:19", "backward of 'twice' for 'x':");
  expect_error(op_yaml("twice_(Tensor(a!) x) -> ()", "[float32]", "{in_place: x}", "    backward: {x: grad}\n"),
               "test.yaml:6:15", "derivatives of ops that write an argument are not supported yet");
}

// dtype(t) is the grammar's one function without a namespace; any other is refused by name.
TEST(RegistryErrors, UnknownFunctionInAFormulaIsNamed) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    backward: {x: \"mul(grad, 2)\"}\n"),
               "test.yaml:6:19", "unknown function 'mul'; ops name their namespace (aten::add.Tensor), and the one built-in is dtype(tensor)");
  const Registry r = parse_registry(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}",
                                            "    backward: {x: \"aten::_softmax_backward_data(grad, x, -1, dtype(x))\"}\n"),
                                    "test.yaml");
  EXPECT_EQ(r.ops()[0].backward.at("x").formula, "aten::_softmax_backward_data(grad, x, -1, dtype(x))");
}

TEST(RegistryErrors, ShapeRuleNamesUnknownArgument) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: y}"), "test.yaml:5:22",
               "shape rule 'same_as' names argument 'y', but 'twice' has arguments: x");
}

TEST(RegistryErrors, ShapeRuleNamesNonTensor) {
  expect_error(op_yaml("twice(Tensor x, float k) -> Tensor", "[float32]", "{same_as: k}"), "test.yaml:5:22",
               "names argument 'k', which is not a Tensor");
}

TEST(RegistryErrors, UnknownShapeRule) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{like: x}"), "test.yaml:5:12",
               "unknown shape rule [like]; expected one of: same_as, broadcast, in_place, out, custom");
}

TEST(RegistryErrors, UnknownCustomRule) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{custom: nope}"), "test.yaml:5:21",
               "unknown custom shape rule 'nope'; core has: crop, rms_norm");
}

TEST(RegistryErrors, BroadcastNeedsTwo) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{broadcast: [x]}"), "test.yaml:5:24",
               "broadcast takes two or more arguments, found 1");
}

TEST(RegistryErrors, ExtraRuleKeys) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x, like: x}"), "test.yaml:5:12",
               "has keys [like, same_as]; expected exactly [same_as]");
}

TEST(RegistryErrors, MutationWithoutMutatingRule) {
  expect_error(op_yaml("twice_(Tensor(a!) x) -> ()", "[float32]", "{same_as: x}"), "test.yaml:5:12",
               "schema of 'twice_' writes [x]; use an in_place or out shape rule");
}

TEST(RegistryErrors, InPlaceRuleWithoutMutation) {
  expect_error(op_yaml("twice_(Tensor x) -> ()", "[float32]", "{in_place: x}"), "test.yaml:5:12",
               "shape rule mutates 'x', but the schema of 'twice_' marks [] as written");
}

TEST(RegistryErrors, OutRuleMustReturnNothing) {
  expect_error(op_yaml("twice_out(Tensor x, *, Tensor(a!) out) -> Tensor", "[float32]", "{out: out, like: x}"),
               "test.yaml:5:12", "'twice_out' writes 'out', so it must return nothing (-> ())");
}

TEST(RegistryErrors, InPlaceOpReturningItsArgumentIsRefused) {
  expect_error(op_yaml("twice_(Tensor(a!) x) -> Tensor(a!)", "[float32]", "{in_place: x}"), "test.yaml:5:12",
               "torch.compile and torch.export cannot functionalize a custom op whose output aliases an input");
}

TEST(RegistryErrors, DuplicateOpAcrossFiles) {
  Registry first = parse_registry(op_yaml(), "a.yaml");
  try {
    first.merge(parse_registry(op_yaml(), "b.yaml"));
    FAIL() << "expected a duplicate-op error";
  } catch (const RegistryError& e) {
    EXPECT_STREQ(e.what(), "b.yaml:2:5: duplicate op 'twice'; first defined at a.yaml:2:5");
  }
}

TEST(RegistryErrors, DuplicateOpInOneFile) {
  const std::string op = "  - {schema: 'twice(Tensor x) -> Tensor', doc: d, dtypes: [float32], shape: {same_as: x}}\n";
  expect_error("ops:\n" + op + op, "test.yaml:3:5", "duplicate op 'twice'; first defined at test.yaml:2:5");
}

// yaml-cpp keeps both entries of a repeated key and node[key] reads the first: the
// second schema was silently dropped.
TEST(RegistryErrors, RepeatedKeyInAnOp) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    schema: thrice(Tensor x) -> Tensor\n"),
               "test.yaml:6:5", "key 'schema' appears twice in one mapping (first at line 2, column 5)");
}

TEST(RegistryErrors, RepeatedKeyInANestedMapping) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x, same_as: y}"), "test.yaml:5:25",
               "key 'same_as' appears twice in one mapping (first at line 5, column 13)");
}

TEST(RegistryErrors, RepeatedTopLevelKey) {
  expect_error(op_yaml() + "ops: []\n", "test.yaml:6:1", "key 'ops' appears twice in one mapping (first at line 1, column 1)");
}

// yaml-cpp shares aliased nodes, so an anchor inside itself is a cycle.
TEST(RegistryErrors, AliasCycleIsRefusedNotWalkedForever) {
  expect_error("ops: &a [*a]\n", "test.yaml:1:6", "nested deeper than 64 levels");
}

TEST(RegistryErrors, TwoArgumentsWithOneName) {
  expect_error(op_yaml("twice(Tensor x, Tensor x) -> Tensor"), "test.yaml:2:13",
               "schema 'twice(Tensor x, Tensor x) -> Tensor' has two arguments named 'x'");
}

}  // namespace
}  // namespace backplane
