// The conformance suite as gtest cases: backend x op x case x dtype, for every
// backend in BACKPLANE_TEST_BACKENDS (default "cpu"). A backend whose device is
// missing here (cuda on a CPU-only machine) is skipped with the reason, and so is an
// op the backend does not implement ("not implemented on BACKEND").
#include <backplane/conformance.h>
#include "conformance/inputs.h"
#include <backplane/loader.h>
#include <backplane/registry.h>
#include <backplane/selection.h>

#include <gtest/gtest.h>

#include "test_backends.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

namespace backplane::conformance {
namespace {

using testing_support::test_backends;

class ConformanceCase : public testing::Test {
 public:
  ConformanceCase(std::string backend, const OpSuite* suite, const Case* c, c10::ScalarType dtype)
      : backend_(std::move(backend)), suite_(suite), case_(c), dtype_(dtype) {}

  void TestBody() override {
    LoadOptions options;
    options.dir = BACKPLANE_PLUGIN_DIR;
    const BackendRecord record = load(backend_, options);
    std::string why;
    auto device = device_for_key(record.dispatch_key, &why);
    if (!device) GTEST_SKIP() << "backend '" << backend_ << "': " << why;
    if (std::find(record.ops.begin(), record.ops.end(), suite_->op) == record.ops.end())
      GTEST_SKIP() << suite_->op << ": not implemented on " << backend_;
    const ScopedPreference only_this(suite_->op, {backend_});
    const Result r = run_case(*suite_, *case_, dtype_, *device);
    if (r.outcome == Outcome::Skipped) GTEST_SKIP() << r.detail;
    EXPECT_EQ(r.outcome, Outcome::Passed) << r.detail;
  }

 private:
  std::string backend_;
  const OpSuite* suite_;
  const Case* case_;
  c10::ScalarType dtype_;
};

// Every backend loaded before the first test: PyTorch's autograd engine makes a thread per
// device type at the process's first backward, so a device loaded after a CPU gradient
// case would have none for its own gradient cases.
class LoadTestBackends : public testing::Environment {
 public:
  void SetUp() override {
    LoadOptions options;
    options.dir = BACKPLANE_PLUGIN_DIR;
    for (const auto& backend : test_backends()) {
      try {
        load(backend, options);
      } catch (const std::exception&) {  // its cases say why
      }
    }
  }
};
testing::Environment* const load_test_backends = testing::AddGlobalTestEnvironment(new LoadTestBackends);

const bool registered = [] {
  for (const auto& backend : test_backends())
    for (const OpSuite& suite : suites())
      for (const auto& c : suite.cases)
        for (auto dtype : case_dtypes(*registry().find(suite.op), c)) {  // gradient cases: one dtype
          const std::string suite_name = "Conformance_" + backend + "_" + suite.op;
          std::string test_name = c.name + "_" + dtype_name(dtype);
          // gtest names: letters, digits and underscores.
          for (char& ch : test_name)
            if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
          testing::RegisterTest(suite_name.c_str(), test_name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                                [=, s = &suite, cp = &c]() -> testing::Test* {
                                  return new ConformanceCase(backend, s, cp, dtype);
                                });
        }
  return true;
}();

// The comparison the whole suite rests on must see a difference when there is one.
TEST(ConformanceHarness, CompareDetectsDifferences) {
  at::Tensor a = at::randn({64});
  EXPECT_EQ(compare(a, a.clone(), true), std::nullopt);
  at::Tensor b = a.clone();
  b[17] = b[17].item<float>() + 1e-3f;
  EXPECT_NE(compare(b, a, false), std::nullopt);
  EXPECT_NE(compare(b, a, true), std::nullopt);
  at::Tensor z = at::zeros({2});
  at::Tensor nz = z.neg();  // -0.0: equal as numbers, not as bits
  EXPECT_EQ(compare(nz, z, false), std::nullopt);
  EXPECT_NE(compare(nz, z, true), std::nullopt);
  EXPECT_NE(compare(a.view({8, 8}), a, false), std::nullopt);
  EXPECT_NE(compare(a.to(at::kDouble), a, false), std::nullopt);
  at::Tensor nan = a.clone();
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(compare(nan, a, false), std::nullopt);
}

TEST(ConformanceHarness, EveryRegistryOpHasASuiteWithCases) {
  const auto all = suites();  // the core's ops first; then any a test's fragment defined
  ASSERT_GE(all.size(), registry().ops().size());
  for (size_t i = 0; i < registry().ops().size(); ++i) {
    EXPECT_EQ(all[i].get().op, registry().ops()[i].name);
    EXPECT_FALSE(all[i].get().cases.empty()) << all[i].get().op;
  }
}

TEST(ConformanceHarness, LayoutsAreWhatTheyClaim) {
  const auto dev = c10::Device(c10::kCPU);
  EXPECT_TRUE(make({4, 6}, Layout::Contiguous, at::kFloat, dev, 1).is_contiguous());
  EXPECT_FALSE(make({4, 6}, Layout::Strided, at::kFloat, dev, 1).is_contiguous());
  EXPECT_FALSE(make({4, 6}, Layout::Transposed, at::kFloat, dev, 1).is_contiguous());
  EXPECT_EQ(make({4, 6}, Layout::Offset, at::kFloat, dev, 1).storage_offset(), 5);
  EXPECT_EQ(make({4, 6}, Layout::Expanded, at::kFloat, dev, 1).stride(0), 0);
  const Made permuted = make_in({2, 3, 4}, Layout::Permuted, at::kFloat, dev, 1);
  EXPECT_EQ(permuted.view.sizes(), at::IntArrayRef({2, 3, 4}));
  EXPECT_EQ(permuted.view.strides(), at::IntArrayRef({1, 2, 6}));  // the base is [4, 3, 2]
  EXPECT_TRUE(permuted.view.equal(permuted.base.permute({2, 1, 0})));
  EXPECT_FALSE(layout_fits(Layout::Permuted, 2));
  EXPECT_TRUE(make({4, 6}, Layout::Strided, at::kHalf, dev, 3).equal(make({4, 6}, Layout::Strided, at::kHalf, dev, 3)));
}

}  // namespace
}  // namespace backplane::conformance
