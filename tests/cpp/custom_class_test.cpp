// Custom classes from the registry: parsing and its errors, and the shipped
// IdentityConv registered by the core (construction, methods, state round trip).
#include <backplane/loader.h>
#include <backplane/registry.h>

#include <torch/custom_class.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

namespace backplane {
namespace {

std::string class_yaml(const std::string& init = "(int channels)",
                       const std::string& methods = "      - schema: channels() -> int\n"
                                                    "        doc: The count.\n"
                                                    "        returns: channels\n") {
  return "classes:\n  - name: Thing\n    doc: A thing.\n    init: " + init + "\n    methods:\n" + methods;
}

void expect_error(const std::string& yaml, const std::string& where, const std::string& message) {
  try {
    Registry r = parse_registry(yaml, "test.yaml");
    r.check_classes();
    FAIL() << "expected an error '" << message << "' at " << where;
  } catch (const RegistryError& e) {
    EXPECT_EQ(e.where().str(), where) << e.what();
    EXPECT_NE(e.message().find(message), std::string::npos) << "message was: " << e.message();
  }
}

TEST(RegistryClasses, ShippedIdentityConv) {
  const ClassDef* cls = registry().find_class("IdentityConv");
  ASSERT_NE(cls, nullptr);
  EXPECT_EQ(cls->init, "(int channels)");
  ASSERT_EQ(cls->state.size(), 1u);
  EXPECT_EQ(cls->state[0].name, "channels");
  EXPECT_EQ(cls->state[0].type, "int");
  ASSERT_EQ(cls->methods.size(), 2u);
  EXPECT_EQ(cls->methods[0].name, "forward");
  EXPECT_EQ(cls->methods[0].kind, MethodDef::Kind::CallsOp);
  EXPECT_EQ(cls->methods[0].target, "identity_conv");
  EXPECT_EQ(cls->methods[1].kind, MethodDef::Kind::ReturnsField);
  EXPECT_EQ(cls->where.file, "registry/classes.yaml");
}

TEST(RegistryClasses, ParsesAValidClass) {
  Registry r = parse_registry(class_yaml("(int channels, float gain, bool on, str tag)"), "test.yaml");
  ASSERT_EQ(r.classes().size(), 1u);
  EXPECT_EQ(r.classes()[0].state.size(), 4u);
  EXPECT_EQ(r.classes()[0].where.str(), "test.yaml:2:5");
}

TEST(RegistryClassErrors, StateTypeNotSupported) {
  expect_error(class_yaml("(Tensor w)"), "test.yaml:4:11",
               "state field 'w' of class 'Thing' has type 'Tensor'; expected one of: bool, float, int, str");
}

TEST(RegistryClassErrors, StateWithDefault) {
  expect_error(class_yaml("(int channels=3)"), "test.yaml:4:11", "has a default; defaults are not supported");
}

TEST(RegistryClassErrors, BadInit) {
  expect_error(class_yaml("(int channels"), "test.yaml:4:11", "bad schema '__init__(int channels -> ()'");
}

TEST(RegistryClassErrors, UnknownKey) {
  expect_error("classes:\n  - name: Thing\n    doc: A.\n    init: ()\n    method: []\n", "test.yaml:5:5",
               "unknown class key 'method'; expected one of: doc, init, methods, name");
}

TEST(RegistryClassErrors, RepeatedKey) {
  expect_error("classes:\n  - name: Thing\n    name: Other\n    doc: A.\n    init: ()\n    methods: []\n", "test.yaml:3:5",
               "key 'name' appears twice in one mapping (first at line 2, column 5)");
}

TEST(RegistryClassErrors, RepeatedMethodKey) {
  expect_error(class_yaml("(int channels)", "      - schema: channels() -> int\n        doc: The count.\n"
                                            "        returns: channels\n        returns: channels\n"),
               "test.yaml:9:9", "key 'returns' appears twice in one mapping (first at line 8, column 9)");
}

TEST(RegistryClassErrors, TwoStateFieldsWithOneName) {
  expect_error(class_yaml("(int channels, float channels)"), "test.yaml:4:11",
               "schema '__init__(int channels, float channels) -> ()' has two arguments named 'channels'");
}

TEST(RegistryClassErrors, MissingMethods) {
  expect_error("classes:\n  - name: Thing\n    doc: A.\n    init: ()\n", "test.yaml:2:5",
               "class of class 'Thing' is missing required key 'methods'");
}

TEST(RegistryClassErrors, MethodNeedsCallsOrReturns) {
  expect_error(class_yaml("(int channels)", "      - schema: f() -> int\n        doc: F.\n"), "test.yaml:6:9",
               "method 'f' needs exactly one of 'calls: <op>' or 'returns: <state field>'");
}

TEST(RegistryClassErrors, ReservedMethodName) {
  expect_error(class_yaml("(int channels)", "      - schema: __getstate__() -> int\n        doc: F.\n        returns: channels\n"),
               "test.yaml:6:17", "method '__getstate__' is reserved");
}

TEST(RegistryClassErrors, ReturnsUnknownField) {
  expect_error(class_yaml("(int channels)", "      - schema: size() -> int\n        doc: F.\n        returns: size\n"),
               "test.yaml:8:18", "'size' is not a state field of class 'Thing'");
}

TEST(RegistryClassErrors, ReturnsFieldWithWrongType) {
  expect_error(class_yaml("(int channels)", "      - schema: channels() -> float\n        doc: F.\n        returns: channels\n"),
               "test.yaml:6:17", "so its schema must be 'channels() -> int'; found 'channels() -> float'");
}

TEST(RegistryClassErrors, CallsUnknownOp) {
  expect_error(class_yaml("(int channels)", "      - schema: forward(Tensor x) -> Tensor\n        doc: F.\n        calls: nope\n"),
               "test.yaml:6:9", "method 'Thing.forward' calls 'nope', which is not an op of the registry");
}

TEST(RegistryClassErrors, CallsOpWithOtherTypes) {
  const std::string yaml =
      "ops:\n  - schema: twice(Tensor x) -> Tensor\n    doc: D.\n    dtypes: [float32]\n    shape: {same_as: x}\n" +
      class_yaml("(int channels)", "      - schema: forward(Tensor x, int k) -> Tensor\n        doc: F.\n        calls: twice\n");
  expect_error(yaml, "test.yaml:11:9",
               "must take and return what the op does: (Tensor) -> (Tensor); found (Tensor, int) -> (Tensor)");
}

TEST(RegistryClassErrors, DuplicateClassAcrossFiles) {
  Registry a = parse_registry(class_yaml(), "a.yaml");
  try {
    a.merge(parse_registry(class_yaml(), "b.yaml"));
    FAIL() << "expected a duplicate-class error";
  } catch (const RegistryError& e) {
    EXPECT_EQ(e.where().str(), "b.yaml:2:5");
    EXPECT_NE(e.message().find("duplicate class 'Thing'; first defined at a.yaml:2:5"), std::string::npos) << e.what();
  }
}

// --- the registered class --------------------------------------------------------------

c10::IValue call(const c10::IValue& self, const std::string& method, std::vector<c10::IValue> args = {}) {
  torch::jit::Stack stack{self};
  for (auto& a : args) stack.push_back(std::move(a));
  self.toObject()->type()->getMethod(method).run(stack);
  return stack.empty() ? c10::IValue() : stack.back();
}

// An IdentityConv object before __init__ or __setstate__, as the unpickler makes one.
c10::IValue blank_identity_conv() {
  const auto type = torch::getCustomClass("__torch__.torch.classes.backplane.IdentityConv");
  EXPECT_NE(type, nullptr);
  return c10::ivalue::Object::create(c10::StrongTypePtr(nullptr, type), type->numAttributes());
}

c10::IValue make_identity_conv(int64_t channels) {
  c10::IValue obj = blank_identity_conv();
  call(obj, "__init__", {channels});
  return obj;
}

TEST(IdentityConvClass, MethodsCallTheOpAndReturnState) {
  load("cpu");
  const c10::IValue obj = make_identity_conv(3);
  EXPECT_EQ(call(obj, "channels").toInt(), 3);
  const at::Tensor x = torch::randn({2, 3, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor y = call(obj, "forward", {x}).toTensor();
  EXPECT_TRUE(y.equal(x));
  // The method's result has the op's strides (contiguous), which the generated fake
  // class predicts by running the op's Meta kernel.
  EXPECT_EQ(y.strides(), torch::empty({2, 3, 4, 5}).strides());
}

TEST(IdentityConvClass, StateRoundTripsThroughGetstateSetstate) {
  const c10::IValue obj = make_identity_conv(7);
  const c10::IValue state = call(obj, "__getstate__");
  ASSERT_TRUE(state.isTuple());
  c10::IValue copy = blank_identity_conv();
  call(copy, "__setstate__", {state});
  EXPECT_EQ(call(copy, "channels").toInt(), 7);
  const auto flat = call(obj, "__obj_flatten__").toTupleRef().elements();
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].toTupleRef().elements()[0].toStringRef(), "channels");
  EXPECT_EQ(flat[0].toTupleRef().elements()[1].toInt(), 7);
}

TEST(IdentityConvClass, UninitialisedObjectErrorsClearly) {
  const c10::IValue obj = blank_identity_conv();
  try {
    call(obj, "channels");
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("used before __init__ or __setstate__ ran"), std::string::npos) << e.what();
  }
}

TEST(IdentityConvClass, SetstateWithWrongFieldCountErrors) {
  const c10::IValue obj = make_identity_conv(1);
  try {
    call(obj, "__setstate__", {c10::ivalue::Tuple::create({c10::IValue(1), c10::IValue(2)})});
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected 1 state fields, found 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace backplane
