// backplane bench counts the bytes a read must move: each distinct element once.
#include "distinct_bytes.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using backplane::bench::distinct_bytes;

TEST(BenchTraffic, ADenseTensorReadsEveryElement) {
  EXPECT_EQ(distinct_bytes(at::randn({4, 5})), 4 * 5 * 4);
  EXPECT_EQ(distinct_bytes(at::randn({4, 5}, at::kBFloat16)), 4 * 5 * 2);
}

TEST(BenchTraffic, TransposedAndSlicedViewsReadEveryElementOfTheView) {
  EXPECT_EQ(distinct_bytes(at::randn({5, 4}).t()), 4 * 5 * 4);
  EXPECT_EQ(distinct_bytes(at::randn({4, 10}).slice(1, 0, 10, 2)), 4 * 5 * 4);
}

TEST(BenchTraffic, AnExpandedViewReadsItsDistinctElementsOnce) {
  EXPECT_EQ(distinct_bytes(at::randn({1, 5}).expand({4, 5})), 5 * 4);
  EXPECT_EQ(distinct_bytes(at::randn({}).expand({3, 3})), 4);
}

TEST(BenchTraffic, AnEmptyTensorReadsNothing) {
  EXPECT_EQ(distinct_bytes(at::randn({0, 5})), 0);
  EXPECT_EQ(distinct_bytes(at::randn({1, 5}).expand({0, 5})), 0);
}
