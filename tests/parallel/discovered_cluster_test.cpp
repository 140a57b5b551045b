// Planning over the machines `orchard cluster up` discovered and the links it measured.
#include <gtest/gtest.h>

#include "parallel/auto_plan.h"
#include "parallel/discovered_cluster.h"
#include "parallel/model_cost.h"
#include "tensor/error.h"

namespace orchard::parallel {
namespace {

// Two links per pair of machines a, b, c: a fast one (10.1.x) and one slowed like the CI test's
// (+2 ms, 100 Mbit/s on 10.2.x), each measured from both ends.
std::vector<MeasuredPath> two_links_per_pair() {
  std::vector<MeasuredPath> out;
  const char* ids[] = {"a", "b", "c"};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      if (i == j) continue;
      out.push_back({ids[i], ids[j], "10.1." + std::to_string(i * 3 + j) + ".2", 60.0 + i + j, 9000});
      out.push_back({ids[i], ids[j], "10.2." + std::to_string(i * 3 + j) + ".2", 4100, 95});
    }
  return out;
}

TEST(DiscoveredCluster, ChoosesTheFastLinkOfEachPairOnce) {
  const std::vector<MeasuredPath> chosen = choose_paths(two_links_per_pair());
  ASSERT_EQ(chosen.size(), 3u);  // a-b, a-c, b-c
  for (const MeasuredPath& p : chosen) {
    EXPECT_EQ(p.address.rfind("10.1.", 0), 0u) << p.from << "-" << p.to << " " << p.address;
    EXPECT_LT(p.rtt_us, 100);
  }
  // A fast but far link loses to a near one only when the transfer makes up for it.
  EXPECT_LT(path_cost_us({"a", "b", "x", 60, 9000}), path_cost_us({"a", "b", "y", 4100, 95}));
  EXPECT_LT(path_cost_us({"a", "b", "x", 2000, 40000}), path_cost_us({"a", "b", "y", 50, 1000}));
}

TEST(DiscoveredCluster, PlanIsThePlannersChoiceForTheSlowestChosenLink) {
  const ModelCost model = ModelCost::from_shape(model_spec("llama-2-70b", DType::Q4_0));
  // No single 24 GiB machine holds 70B in Q4_0: the planner has to split.
  const std::vector<DiscoveredMachine> machines = {
      {"a", "mac-a", 24ull << 30, 8}, {"b", "mac-b", 24ull << 30, 8}, {"c", "mac-c", 24ull << 30, 8}};
  const PredictOptions options;
  const DiscoveredPlan plan = plan_discovered(model, machines, choose_paths(two_links_per_pair()), options);
  ASSERT_EQ(plan.machines.size(), 3u);
  EXPECT_EQ(plan.machines[0], "a");  // the leader stays rank 0
  EXPECT_EQ(plan.bottleneck.address.rfind("10.1.", 0), 0u);
  // The same cluster written by hand for the planner, with the slowest fast link.
  ClusterSpec cl;
  for (const DiscoveredMachine& m : machines) {
    NodeSpec n;
    n.name = m.name;
    n.machine = rough_machine(m.cores, 24);
    n.memory_gib = 24;
    cl.nodes.push_back(n);
  }
  cl.local_backend = "tcp";
  cl.link.spec.latency_us = (60 + 1 + 2) / 2.0;  // b-c (1+2) is the slowest of the fast ones: rtt 63
  cl.link.spec.gbs = 9000 / 8000.0;
  const Prediction expected = choose_plan(model, cl, options);
  EXPECT_EQ(plan.prediction.candidate.label(), expected.candidate.label());
  EXPECT_DOUBLE_EQ(plan.prediction.tg_tps, expected.tg_tps);
  EXPECT_NE(plan.why.find("over 3 of 3 machines"), std::string::npos) << plan.why;
}

TEST(DiscoveredCluster, AMachineWithoutMeasuredLinksIsLeftOutAndSmallModelsStayWhole) {
  const ModelCost small = ModelCost::from_shape(model_spec("llama-3.2-3b", DType::Q4_0));
  std::vector<DiscoveredMachine> machines = {{"a", "mac-a", 64ull << 30, 8}, {"b", "mac-b", 64ull << 30, 8}};
  // A model that fits one machine gains nothing from a split over slow links (each step would
  // wait ~2 ms per exchange); over the fast ones the planner splits it for the second
  // machine's memory bandwidth.
  std::vector<MeasuredPath> slow;
  for (const MeasuredPath& p : two_links_per_pair())
    if (p.address.rfind("10.2.", 0) == 0) slow.push_back(p);
  const DiscoveredPlan one = plan_discovered(small, machines, choose_paths(slow), {});
  EXPECT_EQ(one.machines, std::vector<std::string>{"a"});
  EXPECT_TRUE(one.bottleneck.address.empty());
  EXPECT_EQ(plan_discovered(small, machines, choose_paths(two_links_per_pair()), {}).machines.size(), 2u);
  // d was heard but never measured: a split cannot use it, and nothing fits without it.
  const ModelCost big = ModelCost::from_shape(model_spec("llama-2-70b", DType::Q4_0));
  machines = {{"a", "mac-a", 24ull << 30, 8}, {"d", "mac-d", 24ull << 30, 8}};
  EXPECT_THROW(plan_discovered(big, machines, choose_paths(two_links_per_pair()), {}), orchard::Error);
}

TEST(DiscoveredCluster, ACalibratedMachineIsPlannedWithItsMeasuredRates) {
  const ModelCost model = ModelCost::from_shape(model_spec("llama-2-70b", DType::Q4_0));
  MachineSpec fast = rough_machine(8, 24);
  fast.membw_gbs.at_count[8] = 200;  // ten times the rough figure
  std::vector<DiscoveredMachine> machines = {
      {"a", "mac-a", 24ull << 30, 8}, {"b", "mac-b", 24ull << 30, 8}, {"c", "mac-c", 24ull << 30, 8}};
  const std::vector<MeasuredPath> chosen = choose_paths(two_links_per_pair());
  const DiscoveredPlan rough = plan_discovered(model, machines, chosen, {});
  for (auto& m : machines) m.calibrated = fast;
  const DiscoveredPlan measured = plan_discovered(model, machines, chosen, {});
  EXPECT_GT(measured.prediction.tg_tps, rough.prediction.tg_tps * 2);
  ClusterSpec cl;
  for (const DiscoveredMachine& m : machines) {
    NodeSpec n;
    n.name = m.name;
    n.machine = fast;
    n.memory_gib = 24;
    cl.nodes.push_back(n);
  }
  cl.local_backend = "tcp";
  cl.link.spec.latency_us = 63 / 2.0;
  cl.link.spec.gbs = 9000 / 8000.0;
  const Prediction expected = choose_plan(model, cl, {});
  EXPECT_EQ(measured.prediction.candidate.label(), expected.candidate.label());
  EXPECT_DOUBLE_EQ(measured.prediction.tg_tps, expected.tg_tps);
}

}  // namespace
}  // namespace orchard::parallel
