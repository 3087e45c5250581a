// The registry parser: the shipped registry, and every error a registry author can
// make, each with its file:line:column and message.
#include "formula/reference_expr.h"
#include <backplane/registry.h>

#include "registry_yaml.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <tuple>

namespace backplane {
namespace {

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

// `flops:` (the bench's %peak): a count > 0 per element of the largest Tensor argument.
TEST(Registry, FlopsPerElement) {
  const Registry r = parse_registry(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    flops: 2.5\n"),
                                    "test.yaml");
  EXPECT_EQ(r.ops()[0].checks.flops_per_element, 2.5);
  EXPECT_EQ(parse_registry(op_yaml(), "test.yaml").ops()[0].checks.flops_per_element, 0);  // not given
  EXPECT_EQ(registry().find("rms_norm")->checks.flops_per_element, 4);  // the shipped registry
}

TEST(RegistryErrors, FlopsMustBeAPositiveNumber) {
  const std::string expected = "flops of 'twice' must be a number > 0: the floating-point operations per element of "
                               "its largest Tensor argument (e.g. 1 for add), found ";
  for (const auto& [value, found] : std::vector<std::pair<std::string, std::string>>{
           {"0", "'0'"}, {"-1", "'-1'"}, {"many", "'many'"}, {".inf", "'.inf'"}, {"1e999", "'1e999'"},
           {"[1]", "a list"}, {"2x", "'2x'"}})
    expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    flops: " + value + "\n"),
                 "test.yaml:6:12", expected + found);
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
               "test.yaml:6:5", "unknown key 'dtype'; expected one of: autocast, backward, baseline, bench, choices, doc, dtypes, errors, exact, flops, reference, samples, schema, shape, sharding, tolerance");
}

TEST(RegistryErrors, ReservedKey) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    backends: [cpu]\n"),
               "test.yaml:6:5", "key 'backends' is reserved for later work");
}

TEST(Registry, AutocastRules) {
  auto rule = [](const std::string& extra) {
    return parse_registry(op_yaml("twice(Tensor x) -> Tensor", "[float32, float16, bfloat16]", "{same_as: x}", extra),
                          "test.yaml")
        .ops()[0]
        .autocast;
  };
  EXPECT_EQ(rule(""), AutocastRule::Promote);
  EXPECT_EQ(rule("    autocast: promote\n"), AutocastRule::Promote);
  EXPECT_EQ(rule("    autocast: fp32\n"), AutocastRule::Fp32);
  EXPECT_EQ(rule("    autocast: lower\n"), AutocastRule::Lower);
  const Registry& shipped = registry();
  EXPECT_EQ(shipped.find("add")->autocast, AutocastRule::Promote);
  EXPECT_EQ(shipped.find("softmax")->autocast, AutocastRule::Fp32);
  EXPECT_EQ(shipped.find("identity_conv")->autocast, AutocastRule::Lower);
}

TEST(RegistryErrors, AutocastRuleIsOneOfThree) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    autocast: fp16\n"),
               "test.yaml:6:15", "op 'twice': key 'autocast' is 'fp16'; expected one of: fp32, lower, promote");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    autocast: [fp32]\n"),
               "test.yaml:6:15", "op 'twice': key 'autocast' is a list; expected one of: fp32, lower, promote");
}

TEST(RegistryErrors, AutocastRuleNeedsTheDtypesItCastsTo) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float64]", "{same_as: x}", "    autocast: fp32\n"),
               "test.yaml:6:15", "op 'twice': key 'autocast' is 'fp32', but its dtypes lack float32");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32, float16]", "{same_as: x}", "    autocast: lower\n"),
               "test.yaml:6:15", "op 'twice': key 'autocast' is 'lower' (the autocast dtype: float16 or bfloat16), "
                                 "but its dtypes lack bfloat16");
}

TEST(RegistryErrors, AutocastDoesNotApplyToOpsThatWrite) {
  expect_error(op_yaml("twice_(Tensor(a!) x) -> ()", "[float32]", "{in_place: x}", "    autocast: fp32\n"),
               "test.yaml:6:15", "op 'twice_': key 'autocast' does not apply to an op that writes an argument");
}

TEST(Registry, BackwardFormulasPerTensorArgument) {
  Registry r = parse_registry(op_yaml("twice(Tensor x, float s=2.0) -> Tensor", "[float32]", "{same_as: x}",
                                      "    backward: {x: \"aten::mul.Scalar(grad, 2)\"}\n"),
                              "test.yaml");
  EXPECT_EQ(r.ops()[0].backward.at("x").formula, "aten::mul.Scalar(grad, 2)");
}

// The document's prod_backward: (Tensor, Tensor), after `prod` (a formula may call an op
// defined further down).
const std::string kProdBackward =
    "  - schema: prod_backward(Tensor grad, Tensor a, Tensor b) -> (Tensor, Tensor)\n    doc: Both gradients.\n"
    "    dtypes: [float32]\n    shape: [{same_as: a}, {same_as: b}]\n";

// One call giving several arguments' gradients: a backward op returning both.
TEST(Registry, BackwardKeyNamingSeveralArguments) {
  Registry r = parse_registry(
      op_yaml("prod(Tensor a, Tensor b) -> Tensor", "[float32]", "{broadcast: [a, b]}",
              "    backward: {\"a, b\": \"backplane::prod_backward(grad, a, b)\"}\n") + kProdBackward,
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
               "test.yaml:6:34", "backward of 'twice' for 'x': formula 'aten::mul(grad', column 15: expected ')'");
  expect_error(op_yaml("twice_(Tensor(a!) x) -> ()", "[float32]", "{in_place: x}", "    backward: {x: grad}\n"),
               "test.yaml:6:15", "derivatives of ops that write an argument are not supported yet");
}

// dtype(t) is the grammar's one function without a namespace; any other is refused by name.
TEST(RegistryErrors, UnknownFunctionInAFormulaIsNamed) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    backward: {x: \"mul(grad, 2)\"}\n"),
               "test.yaml:6:20", "unknown function 'mul'; ops name their namespace (aten::add.Tensor), and the one built-in is dtype(tensor)");
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

// `layout: x` names the argument a custom rule's output is laid out as (rotary's q and k).
TEST(Registry, CustomRuleNamesItsLayoutSource) {
  EXPECT_EQ(registry().find("rotary")->shape.args, (std::vector<std::string>{"x"}));
  EXPECT_TRUE(registry().find("crop")->shape.args.empty());
  const Registry r = parse_registry(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{custom: rms_norm, layout: x}",
                                            "    samples: [{x: [2, 3]}]\n"),
                                    "test.yaml");
  EXPECT_EQ(r.ops()[0].shape.custom, "rms_norm");
  EXPECT_EQ(r.ops()[0].shape.args, (std::vector<std::string>{"x"}));
}

TEST(RegistryErrors, CustomLayoutNamesUnknownArgument) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{custom: rms_norm, layout: y}"), "test.yaml:5:39",
               "shape rule 'layout' names argument 'y', but 'twice' has arguments: x");
}

TEST(RegistryErrors, CustomLayoutNamesNonTensor) {
  expect_error(op_yaml("twice(Tensor x, float k) -> Tensor", "[float32]", "{custom: rms_norm, layout: k}"),
               "test.yaml:5:39", "names argument 'k', which is not a Tensor");
}

TEST(RegistryErrors, CustomRuleWithAnotherKey) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{custom: rms_norm, like: x}"), "test.yaml:5:12",
               "has keys [custom, like]; expected exactly [custom]");
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


// Every formula is checked when the registry is read (the build's registry check, a
// plugin's manifest tool, the loader), at the name it is about: not at the first backward.
TEST(RegistryFormulas, AMisspeltNameIsRefusedAtIt) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}",
                       "    backward: {x: \"aten::mul.Scalar(gard, 2)\"}\n"),
               "test.yaml:6:37", "backward of 'twice' for 'x': formula 'aten::mul.Scalar(gard, 2)', column 18: "
                                 "unknown name 'gard'; expected one of: grad, result, x");
  // A reference reads the op's arguments only.
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    reference: aten::neg(grad)\n"),
               "test.yaml:6:26", "unknown name 'grad'; expected one of: x");
  // Where the formula is not written verbatim (an escape), its scalar's place.
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}",
                       "    backward: {x: \"aten::mul.Scalar(gard,\\t2)\"}\n"),
               "test.yaml:6:19", "unknown name 'gard'");
}

TEST(RegistryFormulas, UnknownOpsAndOverloadsAreRefusedAtTheirName) {
  const auto op = [](const std::string& reference) {
    return op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    reference: " + reference + "\n");
  };
  expect_error(op("aten::mul.Scalar(aten::tanhh(x), 2)"), "test.yaml:6:33",
               "reference of 'twice': formula 'aten::mul.Scalar(aten::tanhh(x), 2)', column 18: unknown op aten::tanhh");
  expect_error(op("aten::add.Tensr(x, x)"), "test.yaml:6:16", "aten::add has no overload 'Tensr'; it has: aten::add.Scalar, ");
  expect_error(op("aten::add(x, x)"), "test.yaml:6:16", "aten::add has no default overload; write one of: aten::add.Scalar, ");
  expect_error(op("aten::add.Tensor(x, x, alpah=2)"), "test.yaml:6:39",
               "aten::add.Tensor has no argument 'alpah'; it has: self, other, alpha");
  expect_error(op("aten::add.Tensor(x)"), "test.yaml:6:16", "aten::add.Tensor needs argument 'other' (Tensor)");
  expect_error(op("aten::neg(x, x)"), "test.yaml:6:29", "aten::neg takes 1 argument(s), found more");
  expect_error(op("aten::add.Tensor(x, x, self=x)"), "test.yaml:6:39", "aten::add.Tensor is given argument 'self' twice");
}

TEST(RegistryFormulas, IndexesAndDtypesNeedTheirTypes) {
  const auto crop = [](const std::string& reference) {
    return op_yaml("crop1(Tensor x, int[] box) -> Tensor", "[float32]", "{same_as: x}",
                   "    samples: [{x: [4, 8], box: [0, 0, 2, 2]}]\n    reference: " + reference + "\n");
  };
  parse_registry(crop("aten::narrow(x, 0, box[0], box[1])"), "test.yaml");
  expect_error(crop("aten::narrow(x, 0, x[0], 1)"), "test.yaml:7:35", "'x[0]' indexes 'x', which is Tensor, not an int list");
  expect_error(crop("aten::_softmax_backward_data(x, x, -1, dtype(box))"), "test.yaml:7:61",
               "dtype(box) needs a Tensor, and 'box' is int[]");
  expect_error(crop("aten::cat([x, 1])"), "test.yaml:7:30", "a list holds integers only or tensors only, found both");
}

// A reference gives one value per output; a `backward:` key naming k arguments, k gradients.
TEST(RegistryFormulas, EachFormulaGivesAsManyTensorsAsItMust) {
  expect_error(op_yaml("scale2(Tensor x, Tensor w) -> Tensor", "[float32]", "{broadcast: [x, w]}",
                       "    backward: {\"x, w\": \"aten::mul.Tensor(grad, w)\"}\n"),
               "test.yaml:6:25", "backward of 'scale2' for 'x, w' gives 1 value(s); a key naming 2 arguments needs a call "
                                 "giving one gradient per argument");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    backward: {x: \"aten::chunk(grad, 2)\"}\n"),
               "test.yaml:6:20", "backward of 'twice' for 'x' gives Tensor[], not a Tensor");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    reference: aten::size.int(x, 0)\n"),
               "test.yaml:6:16", "reference of 'twice' gives int, not a Tensor");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    reference: \"[aten::sin(x)]\"\n"),
               "test.yaml:6:17", "reference of 'twice' is a list; an op with one output has one reference");
  expect_error(op_yaml("split2(Tensor x, Tensor w) -> (Tensor, Tensor)", "[float32]", "[{same_as: x}, {same_as: w}]",
                       "    reference: aten::sin(x)\n"),
               "test.yaml:6:16", "reference of 'split2' gives 1 value(s) for the op's 2 outputs");
  parse_registry(op_yaml("split2(Tensor x, Tensor w) -> (Tensor, Tensor)", "[float32]", "[{same_as: x}, {same_as: w}]",
                         "    reference: \"[aten::sin(x), aten::cos(w)]\"\n"),
                 "test.yaml");
}

// A call of the document's own namespace resolves to its ops, wherever they are defined.
TEST(RegistryFormulas, TheDocumentsOwnOpsResolve) {
  const auto prod = [](const std::string& formula) {
    return op_yaml("prod(Tensor a, Tensor b) -> Tensor", "[float32]", "{broadcast: [a, b]}",
                   "    backward: {\"a, b\": \"" + formula + "\"}\n") + kProdBackward;
  };
  expect_error(prod("backplane::prod_backward.x(grad, a, b)"), "test.yaml:6:25",
               "backplane::prod_backward has no overload 'x'; it has: backplane::prod_backward");
  expect_error(prod("backplane::prod_backwards(grad, a, b)"), "test.yaml:6:25", "unknown op backplane::prod_backwards");
  expect_error(prod("backplane::prod_backward(grad, a)"), "test.yaml:6:25", "backplane::prod_backward needs argument 'b'");
}

TEST(RegistryFormulas, StringsAndNoneAreArguments) {
  const Registry r = parse_registry(
      op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}",
              "    reference: \"aten::gelu(x, approximate='tanh')\"\n    baseline: aten::sum.dim_IntList(x, None, true)\n"),
      "test.yaml");
  EXPECT_EQ(r.ops()[0].checks.reference, "aten::gelu(x, approximate='tanh')");
}

// Names torch.ops.<namespace>.<op> cannot reach: Python keywords and the attributes every
// namespace has (torch/_ops.py's _OpNamespace).
TEST(RegistryErrors, OpNamesTorchOpsCannotReachAreRefused) {
  // (class, def, None, ...: the schema parser refuses them already.)
  for (const std::string name : {"name", "_dir", "__init__", "__getattr__", "lambda", "yield"})
    expect_error(op_yaml(name + "(Tensor x) -> Tensor"), "test.yaml:2:13", "op name '" + name + "' is ");
  parse_registry(op_yaml("names(Tensor x) -> Tensor"), "test.yaml");
  parse_registry(op_yaml("_dir2(Tensor x) -> Tensor"), "test.yaml");
}

TEST(Formula, StringsAndNoneEvaluate) {
  using conformance::ReferenceExpr;
  const at::Tensor x = at::randn({5}, at::kDouble);
  const std::map<std::string, c10::IValue> names = {{"x", x}};
  EXPECT_TRUE(at::equal(ReferenceExpr::parse("aten::gelu(x, approximate='tanh')").evaluate(names).toTensor(),
                        at::gelu(x, "tanh")));
  EXPECT_TRUE(at::equal(ReferenceExpr::parse("aten::gelu(x, approximate=\"none\")").evaluate(names).toTensor(), at::gelu(x)));
  EXPECT_TRUE(at::allclose(ReferenceExpr::parse("aten::sum.dim_IntList(x, None)").evaluate(names).toTensor(), x.sum()));
}

TEST(Formula, SyntaxErrorsNameTheirColumn) {
  const std::vector<std::tuple<std::string, size_t, std::string>> cases = {
      {"aten::gelu(x, approximate='tanh)", 27, "unterminated string: no closing '"},
      {"aten::narrow(x, 0, box[1.5], 1)", 24, "an index is an integer, found '1.5'"},
      {"box[99999999999999999999]", 5, "integer '99999999999999999999' is out of range"},
      {"aten::add.Tensor(x, 1-2)", 22, "expected ')'"},
      {"aten::mul.Scalar(x, 1e)", 21, "bad number '1e'"},
      {"aten::neg(@)", 11, "expected an expression, found '@'"},
      {"mul(x, 2)", 1, "unknown function 'mul'"},
      {std::string(101, '[') + std::string(101, ']'), 101, "nested deeper than 100 calls or lists"},
  };
  for (const auto& [text, column, message] : cases) {
    try {
      conformance::ReferenceExpr::parse(text);
      ADD_FAILURE() << text << " parsed";
    } catch (const conformance::FormulaError& e) {
      EXPECT_EQ(e.column(), column) << text << ": " << e.what();
      EXPECT_EQ(e.message().rfind(message, 0), 0u) << text << ": " << e.what();
      EXPECT_EQ(std::string(e.what()), "formula '" + text + "', column " + std::to_string(column) + ": " + e.message());
    }
  }
}

}  // namespace
}  // namespace backplane
