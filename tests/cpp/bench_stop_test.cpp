// backplane bench's decisions, without timing anything: when a row stops sampling
// (adaptive_stop.h) and when a run's copy_ rows say the machine was busy (noisy_copy.h).
#include "adaptive_stop.h"
#include "noisy_copy.h"

#include <gtest/gtest.h>

using namespace backplane::bench;

namespace {
const StopRule kRule{/*min_seconds=*/0.1, /*max_seconds=*/1.0, /*target_spread=*/0.02, /*min_samples=*/5};
const std::vector<double> kSteady(10, 1e-3);                                   // spread 0
const std::vector<double> kNoisy = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};           // spread 0.41
}  // namespace

TEST(BenchStop, NeverBeforeTheMinimumTimeHoweverSteady) {
  EXPECT_FALSE(should_stop(kSteady, 0.099, kRule));
  EXPECT_TRUE(should_stop(kSteady, 0.1, kRule));
}

TEST(BenchStop, AtTheMaximumTimeHoweverNoisy) {
  EXPECT_FALSE(should_stop(kNoisy, 0.999, kRule));
  EXPECT_TRUE(should_stop(kNoisy, 1.0, kRule));
  EXPECT_TRUE(should_stop({5.0}, 2.0, kRule));  // one long sample past the maximum: enough
  EXPECT_FALSE(should_stop({}, 2.0, kRule));    // but never without a sample
}

TEST(BenchStop, BetweenThemOnceTheSpreadIsOnTargetWithEnoughSamples) {
  EXPECT_FALSE(should_stop(std::vector<double>(4, 1e-3), 0.5, kRule));  // too few to estimate a spread
  std::vector<double> near = {1.00, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07, 1.08};
  EXPECT_NEAR(relative_spread(near), 0.02 / 1.04, 1e-12);  // quartiles 1.02, 1.06; median 1.04
  EXPECT_TRUE(should_stop(near, 0.5, kRule));
  near.push_back(1.5);
  near.push_back(1.6);
  EXPECT_GT(relative_spread(near), 0.02);
  EXPECT_FALSE(should_stop(near, 0.5, kRule));
}

TEST(BenchNoise, CopyRowsOfTheSameBytesMoreThanTheThresholdApartAreFlagged) {
  EXPECT_TRUE(noisy_copy_groups({{"cpu", "float32", 100, 10.0}, {"cpu", "float32", 100, 12.9}}).empty());
  const auto lines = noisy_copy_groups({{"cpu", "float32", 100, 10.0}, {"cpu", "float32", 100, 13.1}});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "cpu float32 copy_ of 100 bytes: 2 timings from 10.00 to 13.10 us (31% apart, threshold 30%)");
  // other sizes, dtypes or backends are no evidence against each other
  EXPECT_TRUE(noisy_copy_groups({{"cpu", "float32", 100, 10.0}, {"cpu", "float32", 200, 40.0},
                                 {"cpu", "bfloat16", 100, 40.0}, {"npu", "float32", 100, 40.0}})
                  .empty());
}
