// The core's TORCH_LIBRARY block: every registry schema is registered once, tagged
// pt2_compliant, with a Meta kernel that applies the op's contract.
#include <backplane/registry.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

namespace backplane {
namespace {

c10::OperatorHandle handle(const std::string& op) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(("backplane::" + op).c_str(), "");
}

at::Tensor meta(at::IntArrayRef sizes, c10::ScalarType dtype = at::kFloat) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).device(at::kMeta));
}

TEST(Schemas, EveryRegistryOpIsRegisteredWithItsSchema) {
  for (const OpDef& op : registry().ops()) {
    auto h = handle(op.name);
    const auto& schema = h.schema();
    EXPECT_EQ(schema.name(), "backplane::" + op.name);
    ASSERT_EQ(schema.arguments().size(), op.arg_names.size()) << op.name;
    for (size_t i = 0; i < op.arg_names.size(); ++i) EXPECT_EQ(schema.arguments()[i].name(), op.arg_names[i]);
    EXPECT_TRUE(h.hasTag(at::Tag::pt2_compliant_tag)) << op.name;
    EXPECT_TRUE(h.hasKernelForDispatchKey(c10::DispatchKey::Meta)) << op.name << " has no Meta kernel";
  }
}

TEST(Schemas, BackwardThroughAnOpWithoutDerivativeIsAnErrorNamingIt) {
  // From libtorch alone, no Python: the core's Autograd kernel.
  // Meta tensors carry autograd like any other, so no plugin is needed.
  at::Tensor img = meta({2, 8}).requires_grad_();
  at::Tensor out = handle("crop").typed<at::Tensor(const at::Tensor&, at::IntArrayRef)>().call(img, {0, 0, 1, 2});
  ASSERT_TRUE(out.requires_grad()) << "the output must carry the graph, never silently cut it";
  try {
    out.sum().backward();
    FAIL() << "backward through crop ran";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("backplane::crop has no derivative for 'img'"), std::string::npos)
        << e.what();
  }
}

TEST(Schemas, BackwardFormulasRunFromLibtorch) {
  // mul's registry formulas, broadcasting summed back: sizes on Meta tensors.
  at::Tensor a = meta({4, 1, 5}).requires_grad_(), b = meta({3, 5}).requires_grad_();
  at::Tensor out = handle("mul").typed<at::Tensor(const at::Tensor&, const at::Tensor&)>().call(a, b);
  EXPECT_EQ(out.grad_fn()->name(), "backplane::mul_backward");
  out.sum().backward();
  ASSERT_TRUE(a.grad().defined() && b.grad().defined());
  EXPECT_EQ(a.grad().sizes(), a.sizes());
  EXPECT_EQ(b.grad().sizes(), b.sizes());
}

TEST(Schemas, MutationIsDeclared) {
  const auto& scale = handle("scale_").schema();
  ASSERT_TRUE(scale.arguments()[0].alias_info());
  EXPECT_TRUE(scale.arguments()[0].alias_info()->isWrite());
  EXPECT_TRUE(handle("scale_").schema().returns().empty());
  EXPECT_TRUE(handle("sin_out").schema().returns().empty());
  EXPECT_TRUE(handle("sin_out").schema().arguments()[1].kwarg_only());
}

TEST(MetaKernels, BroadcastRule) {
  auto op = handle("add").typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>();
  at::Tensor out = op.call(meta({4, 1, 5}), meta({3, 5}), 1);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({4, 3, 5}));
  EXPECT_TRUE(out.is_meta());
  EXPECT_TRUE(out.is_contiguous());
}

TEST(MetaKernels, InPlaceRuleChecksAndReturnsNothing) {
  auto op = handle("scale_").typed<void(at::Tensor&, double)>();
  at::Tensor x = meta({3, 2});
  op.call(x, 2.0);
  EXPECT_EQ(x.sizes(), at::IntArrayRef({3, 2}));
  at::Tensor expanded = meta({1, 2}).expand({3, 2});
  EXPECT_THROW(op.call(expanded, 2.0), c10::ValueError);
}

TEST(MetaKernels, OutRuleNeverResizesOut) {
  auto op = handle("sin_out").typed<void(const at::Tensor&, at::Tensor&)>();
  at::Tensor out = meta({2, 7});
  op.call(meta({2, 7}), out);
  EXPECT_EQ(out.sizes(), at::IntArrayRef({2, 7}));
  at::Tensor wrong = meta({0});
  EXPECT_THROW(op.call(meta({2, 7}), wrong), c10::ValueError);
  EXPECT_EQ(wrong.sizes(), at::IntArrayRef({0}));
}

TEST(MetaKernels, CustomRules) {
  auto crop = handle("crop").typed<at::Tensor(const at::Tensor&, at::IntArrayRef)>();
  EXPECT_EQ(crop.call(meta({2, 3, 10, 12}), {1, 2, 4, 5}).sizes(), at::IntArrayRef({2, 3, 4, 5}));
  auto norm = handle("rms_norm").typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  EXPECT_EQ(norm.call(meta({5, 8}, at::kBFloat16), meta({8}, at::kBFloat16), 1e-6).sizes(), at::IntArrayRef({5, 8}));
}

// Export and compile see only the Meta kernel: it must refuse what the real kernels refuse.
TEST(MetaKernels, RaiseTheContractErrors) {
  auto add = handle("add").typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>();
  try {
    add.call(meta({2, 3}), meta({4}), 1);
    FAIL() << "expected a broadcast error";
  } catch (const c10::Error& e) {
    EXPECT_STREQ(e.what_without_backtrace(),
                 "backplane::add: sizes of 'a' [2, 3] and 'b' [4] do not broadcast (dimension -1: 3 vs 4)");
  }
  try {
    add.call(meta({2}, at::kInt), meta({2}, at::kInt), 1);
    FAIL() << "expected a dtype error";
  } catch (const c10::TypeError& e) {
    EXPECT_STREQ(e.what_without_backtrace(),
                 "backplane::add: argument 'a' has dtype int32, expected one of: float32, float64, float16, bfloat16");
  }
  auto crop = handle("crop").typed<at::Tensor(const at::Tensor&, at::IntArrayRef)>();
  EXPECT_THROW(crop.call(meta({3, 8, 8}), {0, 0, 9, 1}), c10::ValueError);
}

}  // namespace
}  // namespace backplane
