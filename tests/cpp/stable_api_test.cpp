// The core's side of the stable kernel interface (stable_api.h), as a plugin meets it: this
// test program stands in for a plugin, exporting backplane_stable_plugin_init, and takes
// the interface the loader hands over. What a plugin built against version 1 sends, and
// kernels whose declared outputs or parameter kinds differ from the op's schema, must be
// refused before anything registers, each naming what was expected and what was found.
// (cpu_stable, tests/python/plugins/test_stable_abi.py, covers the kernels that are accepted.)
#include <backplane/loader.h>
#include <backplane/plugin/stable_api.h>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <string>

namespace {

const BackplaneStableApi* handed_over = nullptr;

const char* never_called(const BackplaneStableCall*, const uint64_t*, uint64_t, uint64_t) {
  return "a refused kernel was called";
}

// The interface as the loader hands it to a plugin.
const BackplaneStableApi* core_interface() {
  void* self = dlopen(nullptr, RTLD_NOW);
  EXPECT_NE(self, nullptr);
  EXPECT_EQ(backplane::detail::init_stable_plugin(self), std::nullopt);
  return handed_over;
}

constexpr uint64_t kTarget = 0x020b000000000000ULL;  // TORCH_TARGET_VERSION 2.11

BackplaneStableKernelInfo typed(const char* op, uint32_t outputs, const int32_t* kinds, uint32_t params) {
  return {sizeof(BackplaneStableKernelInfo), op, "CPU", &never_called, kTarget, outputs, params, kinds};
}

void expect_refused(const BackplaneStableApi* api, int32_t result, const std::string& message) {
  EXPECT_NE(result, 0);
  EXPECT_NE(std::string(api->last_error()).find(message), std::string::npos) << api->last_error();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const char* backplane_stable_plugin_init(
    const BackplaneStableApi* api) {
  handed_over = api;
  return nullptr;
}

TEST(StableApi, TheCoreHandsOverVersionTwo) {
  const BackplaneStableApi* api = core_interface();
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->version, 2u);
  EXPECT_EQ(api->struct_size, sizeof(BackplaneStableApi));
  EXPECT_NE(api->offer_kernel, nullptr);
  EXPECT_NE(api->offer_typed_kernel, nullptr);
}

TEST(StableApi, AVersionOnePluginIsNeverHandedAScalarOrAnIntList) {
  const BackplaneStableApi* api = core_interface();
  expect_refused(api, api->offer_kernel("backplane::add", "CPU", &never_called, kTarget),
                 "backplane::add: argument 'alpha' is Scalar; the stable kernel path carries Tensor, int, float and "
                 "bool arguments to a plugin built against its interface version 1 (version 2 adds Scalar and int[]");
  expect_refused(api, api->offer_kernel("backplane::crop", "CPU", &never_called, kTarget),
                 "backplane::crop: argument 'box' is int[]; the stable kernel path carries Tensor, int, float and bool");
}

TEST(StableApi, AParameterOfAnotherKindIsRefusedNamingTheArgument) {
  const BackplaneStableApi* api = core_interface();
  const int32_t int_for_float[] = {BACKPLANE_STABLE_TENSOR, BACKPLANE_STABLE_INT};
  auto info = typed("backplane::scale_", 0, int_for_float, 2);
  expect_refused(api, api->offer_typed_kernel(&info),
                 "backplane::scale_: argument 's' is float, the kernel's parameter for it is int64_t (expected double)");
  const int32_t double_for_scalar[] = {BACKPLANE_STABLE_TENSOR, BACKPLANE_STABLE_TENSOR, BACKPLANE_STABLE_FLOAT};
  info = typed("backplane::add", 1, double_for_scalar, 3);
  expect_refused(api, api->offer_typed_kernel(&info),
                 "backplane::add: argument 'alpha' is Scalar, the kernel's parameter for it is double (expected "
                 "backplane::stable::Scalar)");
}

TEST(StableApi, OutputsAndArgumentsMustMatchTheSchemaInNumber) {
  const BackplaneStableApi* api = core_interface();
  const int32_t two_tensors[] = {BACKPLANE_STABLE_TENSOR, BACKPLANE_STABLE_TENSOR};
  auto info = typed("backplane::mul", 0, two_tensors, 2);
  expect_refused(api, api->offer_typed_kernel(&info),
                 "backplane::mul: the kernel takes 0 output(s) and 2 argument(s), the op's schema has 1 and 2");
  info = typed("backplane::add", 1, two_tensors, 2);
  expect_refused(api, api->offer_typed_kernel(&info),
                 "backplane::add: the kernel takes 1 output(s) and 2 argument(s), the op's schema has 1 and 3");
}

TEST(StableApi, AnInfoSmallerThanVersionTwosIsRefused) {
  const BackplaneStableApi* api = core_interface();
  const int32_t two_tensors[] = {BACKPLANE_STABLE_TENSOR, BACKPLANE_STABLE_TENSOR};
  auto info = typed("backplane::mul", 1, two_tensors, 2);
  info.struct_size = 8;
  expect_refused(api, api->offer_typed_kernel(&info), "smaller than version 2's");
  expect_refused(api, api->offer_typed_kernel(nullptr), "smaller than version 2's");
}

TEST(StableApi, AnOpTheRegistryLacksIsRefused) {
  const BackplaneStableApi* api = core_interface();
  const int32_t one_tensor[] = {BACKPLANE_STABLE_TENSOR};
  auto info = typed("backplane::no_such_op", 1, one_tensor, 1);
  expect_refused(api, api->offer_typed_kernel(&info), "no op 'backplane::no_such_op' in the registry");
}

// Accepted offers, on a key no test here calls (XPU): what version 1 carries still goes
// through offer_kernel, as a plugin built against version 1 sends it, and version 2's
// typed offer takes a Scalar and an int[].
TEST(StableApi, BothVersionsAcceptWhatTheyCarry) {
  const BackplaneStableApi* api = core_interface();
  EXPECT_EQ(api->offer_kernel("backplane::mul", "XPU", &never_called, kTarget), 0) << api->last_error();
  const int32_t add_kinds[] = {BACKPLANE_STABLE_TENSOR, BACKPLANE_STABLE_TENSOR, BACKPLANE_STABLE_SCALAR};
  auto add = typed("backplane::add", 1, add_kinds, 3);
  add.dispatch_key = "XPU";
  EXPECT_EQ(api->offer_typed_kernel(&add), 0) << api->last_error();
  const int32_t crop_kinds[] = {BACKPLANE_STABLE_TENSOR, BACKPLANE_STABLE_INT_LIST};
  auto crop = typed("backplane::crop", 1, crop_kinds, 2);
  crop.dispatch_key = "XPU";
  EXPECT_EQ(api->offer_typed_kernel(&crop), 0) << api->last_error();
}
