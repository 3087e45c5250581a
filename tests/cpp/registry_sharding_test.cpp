// The `sharding:` key: each form it takes, the shipped registry's rules, and every
// mistake an author can make, with its file:line:column and message.
#include <backplane/registry.h>

#include "registry_yaml.h"

#include <gtest/gtest.h>

namespace backplane {
namespace {

ShardingRule rule_of(const std::string& extra, const std::string& schema = "twice(Tensor x) -> Tensor",
                     const std::string& shape = "{same_as: x}") {
  return parse_registry(op_yaml(schema, "[float32]", shape, extra), "test.yaml").ops()[0].sharding;
}

TEST(RegistrySharding, EachForm) {
  EXPECT_EQ(rule_of("").kind, ShardingKind::Derived);
  EXPECT_EQ(rule_of("    sharding: pointwise\n").kind, ShardingKind::Pointwise);
  EXPECT_EQ(rule_of("    sharding: replicate\n").kind, ShardingKind::Replicate);
  EXPECT_EQ(rule_of("    sharding: none\n").kind, ShardingKind::None);
  const ShardingRule mixes = rule_of("    sharding: {mixes: 2}\n");
  EXPECT_EQ(mixes.kind, ShardingKind::Mixes);
  EXPECT_EQ(mixes.mixes, 2);
  EXPECT_TRUE(mixes.summed.empty());
  EXPECT_EQ(mixes.where.str(), "test.yaml:6:15");
  const ShardingRule summed = rule_of("    sharding: {mixes: 1, summed: [1]}\n", "two(Tensor x) -> (Tensor, Tensor)",
                                      "[{same_as: x}, {same_as: x}]");
  EXPECT_EQ(summed.summed, std::vector<int>{1});
}

TEST(RegistrySharding, ShippedRules) {
  const Registry& shipped = registry();
  EXPECT_EQ(shipped.find("add")->sharding.kind, ShardingKind::Derived);
  EXPECT_EQ(shipped.find("rms_norm")->sharding.kind, ShardingKind::Mixes);
  EXPECT_EQ(shipped.find("rms_norm")->sharding.mixes, 1);
  EXPECT_EQ(shipped.find("rms_norm_backward")->sharding.summed, std::vector<int>{1});
  EXPECT_EQ(shipped.find("crop")->sharding.mixes, 2);
}

TEST(RegistryShardingErrors, UnknownWord) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    sharding: rowwise\n"),
               "test.yaml:6:15",
               "op 'twice': key 'sharding' is 'rowwise'; expected pointwise, replicate, none, or {mixes: N}");
}

TEST(RegistryShardingErrors, NotAWordOrMapping) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    sharding: [pointwise]\n"),
               "test.yaml:6:15", "op 'twice': key 'sharding' is a list; expected pointwise");
}

TEST(RegistryShardingErrors, MappingKeys) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    sharding: {mix: 1}\n"),
               "test.yaml:6:16", "key 'sharding' has unknown key 'mix'; expected mixes (and optionally summed)");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    sharding: {summed: [0]}\n"),
               "test.yaml:6:15", "key 'sharding' is a mapping without 'mixes'");
}

TEST(RegistryShardingErrors, MixesIsAPositiveInteger) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    sharding: {mixes: 0}\n"),
               "test.yaml:6:23", "mixes is 0; expected the number of trailing dimensions the op reads across, 1 or more");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}", "    sharding: {mixes: last}\n"),
               "test.yaml:6:23", "key 'sharding' has mixes 'last'; expected an integer");
}

TEST(RegistryShardingErrors, SummedNamesAnOutput) {
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}",
                       "    sharding: {mixes: 1, summed: [1]}\n"),
               "test.yaml:6:35", "has summed output 1, but the op returns 1 tensor(s); expected an index from 0 to 0");
  expect_error(op_yaml("two(Tensor x) -> (Tensor, Tensor)", "[float32]", "[{same_as: x}, {same_as: x}]",
                       "    sharding: {mixes: 1, summed: [0, 0]}\n"),
               "test.yaml:6:38", "names summed output 0 twice");
  expect_error(op_yaml("twice(Tensor x) -> Tensor", "[float32]", "{same_as: x}",
                       "    sharding: {mixes: 1, summed: 0}\n"),
               "test.yaml:6:34", "has summed a scalar; expected a list of output indices");
}

}  // namespace
}  // namespace backplane
