// `orchard network simulate` drives the real job store and placement with simulated nodes:
// every job is placed (each node frees its slot as soon as it has the job), and the report's
// figures add up. Timing is reported, never asserted (docs/network.md, "Scale").
#include "network/simulate.h"

#include <gtest/gtest.h>

#include "network/job_store.h"
#include "network/store_backends.h"

namespace orchard::network {
namespace {

class SimulateTest : public test::BackendTest {};
INSTANTIATE_TEST_SUITE_P(Backends, SimulateTest, ::testing::Values(test::Backend::SQLite, test::Backend::PostgreSQL),
                         test::backend_name);

TEST_P(SimulateTest, PlacesEveryJobAmongTheSimulatedNodesThroughTheRealStore) {
  SimulateOptions o;
  o.nodes = 30;
  o.jobs = 60;
  o.store = fresh("simulate");
  int lines = 0;
  const SimulateReport r = simulate(o, [&](const std::string&) { ++lines; });
  EXPECT_EQ(r.nodes, 30);
  EXPECT_EQ(r.jobs, 60);
  EXPECT_EQ(r.placed, 60);
  EXPECT_EQ(r.waiting + r.failed, 0);
  EXPECT_GT(r.placements_per_s, 0);
  EXPECT_LE(r.p50_ms, r.p99_ms);
  EXPECT_LE(r.p99_ms, r.max_ms);
  EXPECT_GE(lines, 1);
  // What it left in the store is what a coordinator would have: 30 nodes, 60 jobs done.
  auto store = JobStore::open(o.store);
  EXPECT_EQ(store.nodes().size(), 30u);
  EXPECT_EQ(store.job_counts()[JobState::Done], 60);
  EXPECT_THROW(simulate({0, 1, o.store, 1}), Error);
}

}  // namespace
}  // namespace orchard::network
