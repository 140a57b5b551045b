// A cabled group's description: every rank's machine reaches rank 0 in rank order, named
// uniquely, with the link the ranks measured, and it is a registration the coordinator accepts.
#include "node/group.h"

#include <gtest/gtest.h>

#include <mutex>

#include "dist/dist_harness.h"

namespace orchard::node {
namespace {

TEST(Group, RankZeroGetsEveryMachineAndTheMeasuredLink) {
  std::mutex mu;
  GroupDescription zero;
  std::vector<size_t> others;
  dist::testing::run_ranks("tcp", 3, [&](dist::Group& g) {
    protocol::MachineInfo m;
    m.name = g.rank() < 2 ? "box" : "other";  // ranks 0 and 1 share a host
    m.chip = "cpu";
    m.memory_bytes = (uint64_t{1} << 30) * static_cast<uint64_t>(g.rank() + 1);
    m.mem_bw_gbs = 10 + g.rank();
    m.cores = 4;
    GroupDescription d = describe_group(g, m);
    std::lock_guard lock(mu);
    if (g.rank() == 0) zero = std::move(d);
    else others.push_back(d.machines.size());
  });
  EXPECT_EQ(others, (std::vector<size_t>{0, 0}));
  ASSERT_EQ(zero.machines.size(), 3u);
  EXPECT_EQ(zero.machines[0].name, "box#0");
  EXPECT_EQ(zero.machines[1].name, "box#1");
  EXPECT_EQ(zero.machines[2].name, "other");
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(zero.machines[static_cast<size_t>(r)].memory_bytes, (uint64_t{1} << 30) * static_cast<uint64_t>(r + 1));
    EXPECT_EQ(zero.machines[static_cast<size_t>(r)].mem_bw_gbs, 10 + r);
    EXPECT_EQ(zero.machines[static_cast<size_t>(r)].chip, "cpu");
  }
  EXPECT_EQ(zero.group.members, (std::vector<std::string>{"box#0", "box#1", "other"}));
  EXPECT_EQ(zero.group.link, "tcp");
  EXPECT_GT(zero.group.latency_us, 0);
  EXPECT_GT(zero.group.gbs, 0);

  // As rank 0's agent registers it: a description the coordinator reads back unchanged.
  protocol::NodeInfo n;
  n.id = "node-group";
  n.owner = "alice";
  n.machines = zero.machines;
  n.group = zero.group;
  protocol::ModelInfo model;
  model.name = "m";
  model.spec = "llama-3.1-8b";
  model.shape = parallel::model_spec("llama-3.1-8b", DType::Q4_0);
  n.models = {model};
  n.max_context = 4096;
  const protocol::NodeInfo back = protocol::node_info_from_json(protocol::to_json(n));
  ASSERT_TRUE(back.group);
  EXPECT_EQ(back.group->members, zero.group.members);
  EXPECT_EQ(back.machines.size(), 3u);
}

}  // namespace
}  // namespace orchard::node
