// Plugins' own ops (vendor_ops.h) without a plugin: fragments parsed, checked against
// the core registry and each other, defined in PyTorch, and seen by all_ops(). Each
// error names its file:line:column, and a redefinition names the other definition too.
#include <backplane/plugin/op_contract.h>
#include <backplane/plugin/vendor_ops.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/library.h>

namespace backplane {
namespace {

std::string fragment(const std::string& ns, const std::string& schema = "twice(Tensor x) -> Tensor") {
  return "namespace: " + ns + "\nops:\n  - schema: " + schema +
         "\n    doc: Doubles x.\n    dtypes: [float32]\n    shape: {same_as: x}\n";
}

// The RegistryError's location and a part of its message.
void expect_refused(const std::function<void()>& fn, const std::string& where, const std::string& message) {
  try {
    fn();
    FAIL() << "expected an error '" << message << "' at " << where;
  } catch (const RegistryError& e) {
    EXPECT_EQ(e.where().str(), where) << e.what();
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << "message was: " << e.what();
  }
}

TEST(VendorOps, FragmentNeedsItsOwnNamespace) {
  expect_refused([] { parse_fragment(fragment("acme").substr(std::string("namespace: acme\n").size()), "f.yaml"); },
                 "f.yaml:1:1", "must name its namespace");
  expect_refused([] { parse_fragment(fragment("Acme-1"), "f.yaml"); }, "f.yaml:1:12",
                 "should be a lower-case identifier");
  expect_refused([] { parse_fragment(fragment("aten"), "f.yaml"); }, "f.yaml:1:12", "belongs to PyTorch");
  // Namespaces PyTorch defines in C++ and in Python modules (not imported here), its
  // private ones, and those torch.ops.<ns> cannot reach.
  for (const std::string ns : {"quantized_decomposed", "mkldnn", "onednn", "c10d_functional", "higher_order"})
    expect_refused([&] { parse_fragment(fragment(ns), "f.yaml"); }, "f.yaml:1:12", "namespace '" + ns + "' belongs to PyTorch");
  expect_refused([] { parse_fragment(fragment("_c10d_functional"), "f.yaml"); }, "f.yaml:1:12",
                 "starts with '_', which marks PyTorch's private namespaces");
  expect_refused([] { parse_fragment(fragment("load_library"), "f.yaml"); }, "f.yaml:1:12", "is an attribute of torch.ops");
  expect_refused([] { parse_fragment(fragment("class"), "f.yaml"); }, "f.yaml:1:12", "is a Python keyword");
  expect_refused([] { parse_fragment(fragment("acme") + "classes: []\n", "f.yaml"); }, "f.yaml:7:10",
                 "cannot declare classes");
}

TEST(VendorOps, RedefiningACoreOpNamesBothFiles) {
  const OpDef* add = registry().find("add");
  ASSERT_NE(add, nullptr);
  const Fragment f = parse_fragment(fragment("backplane", "add(Tensor x) -> Tensor"), "vendor.yaml");
  expect_refused([&] { check_fragment(f); }, "vendor.yaml:3:5",
                 "redefines backplane::add, which the core registry defines at " + add->where.str());
  // A new name in the core's namespace is refused too: it belongs to the core registry.
  expect_refused([] { check_fragment(parse_fragment(fragment("backplane", "brand_new(Tensor x) -> Tensor"), "v.yaml")); },
                 "v.yaml:3:5", "belongs to the core registry");
}

TEST(VendorOps, DefinedOpsAreRealOpsWithMetaKernels) {
  define_fragment(parse_fragment(fragment("vendor_gtest"), "first.yaml"), "first");
  const OpDef* def = find_op_def("vendor_gtest::twice");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->id(), "vendor_gtest::twice");
  EXPECT_EQ(def->ns, "vendor_gtest");
  bool listed = false;
  for (const OpDef& op : all_ops()) listed = listed || op.id() == "vendor_gtest::twice";
  EXPECT_TRUE(listed);
  auto handle = c10::Dispatcher::singleton().findSchema({"vendor_gtest::twice", ""});
  ASSERT_TRUE(handle.has_value());
  // The Meta kernel from the shape rule, and the contract's messages with the namespace.
  at::Tensor meta = handle->typed<at::Tensor(const at::Tensor&)>().call(at::empty({3, 5}, at::kMeta));
  EXPECT_EQ(meta.sizes(), at::IntArrayRef({3, 5}));
  try {
    handle->typed<at::Tensor(const at::Tensor&)>().call(at::empty({3}, at::dtype(at::kInt).device(at::kMeta)));
    FAIL() << "an int tensor was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("vendor_gtest::twice: argument 'x' has dtype int32"), std::string::npos)
        << e.what();
  }
  // The same file again is a no-op; another file defining the op is refused, naming both.
  define_fragment(parse_fragment(fragment("vendor_gtest"), "first.yaml"), "first");
  expect_refused([] { define_fragment(parse_fragment(fragment("vendor_gtest"), "second.yaml"), "second"); },
                 "second.yaml:3:5", "redefines vendor_gtest::twice, which plugin 'first' already defined at first.yaml:3:5");
}

TEST(VendorOps, AnOpDefinedOutsideBackplaneIsRefused) {
  static torch::Library other(torch::Library::FRAGMENT, "vendor_other", std::nullopt, __FILE__, __LINE__);
  other.def("twice(Tensor x) -> Tensor");
  expect_refused([] { check_fragment(parse_fragment(fragment("vendor_other"), "x.yaml")); }, "x.yaml:3:5",
                 "a library not loaded through backplane already defined");
}

// A namespace a library outside Backplane already has ops in: ops added there would mix
// with its own (and PyTorch's, such as quantized_decomposed, break inside torch).
TEST(VendorOps, ANamespaceAnotherLibraryUsesIsRefused) {
  static torch::Library other(torch::Library::FRAGMENT, "vendor_lib_ns", std::nullopt, __FILE__, __LINE__);
  other.def("its_own(Tensor x) -> Tensor");
  expect_refused([] { check_fragment(parse_fragment(fragment("vendor_lib_ns"), "x.yaml")); }, "x.yaml:3:5",
                 "namespace 'vendor_lib_ns' already holds vendor_lib_ns::its_own, which PyTorch or another library "
                 "defined in this process");
}

// A namespace belongs to the fragment that first defined ops in it.
TEST(VendorOps, AFragmentCannotAddOpsToAnotherPluginsNamespace) {
  define_fragment(parse_fragment(fragment("vendor_owner"), "owner.yaml"), "owner");
  expect_refused([] { check_fragment(parse_fragment(fragment("vendor_owner", "thrice(Tensor x) -> Tensor"), "y.yaml")); },
                 "y.yaml:3:5", "adds ops to namespace 'vendor_owner', which belongs to plugin 'owner' (its fragment owner.yaml)");
  define_fragment(parse_fragment(fragment("vendor_owner"), "owner.yaml"), "owner");  // the owner's again: a no-op
}

// A fragment's formulas are checked against its own ops, PyTorch's, and loaded libraries'.
TEST(VendorOps, AFragmentsFormulasAreChecked) {
  const std::string ns = "namespace: vendor_formulas\nops:\n";
  const std::string op = "  - schema: twice(Tensor x) -> Tensor\n    doc: Doubles x.\n    dtypes: [float32]\n"
                         "    shape: {same_as: x}\n";
  parse_fragment(ns + op + "    reference: \"aten::gelu(x, approximate='tanh')\"\n"
                           "    backward: {x: \"vendor_formulas::twice(grad)\"}\n", "f.yaml");
  expect_refused([&] { parse_fragment(ns + op + "    backward: {x: \"vendor_formulas::twise(grad)\"}\n", "f.yaml"); },
                 "f.yaml:7:20", "unknown op vendor_formulas::twise");
}

}  // namespace
}  // namespace backplane
