// Placement: memory fit through the planner, speed × (1 − load) × reliability, nodes that
// cannot start now skipped, a job nobody can take refused with every node's reason, and the
// machines of different nodes never combined.
#include "network/placement.h"

#include <gtest/gtest.h>

#include <set>

#include "network/nodes_fixture.h"

namespace orchard::network {
namespace {

using namespace orchard::network::testing;

constexpr int64_t kPlaceNow = 1'000'000;

JobDemand demand(const ModelInfo& m, int64_t n_ctx = 4096) {
  JobDemand d;
  d.model = m.name;
  d.n_ctx = n_ctx;
  d.prompt_tokens = 256;
  d.max_tokens = 256;
  return d;
}

PlacementResult run(const JobDemand& d, const std::vector<NodeView>& nodes) { return place(d, nodes, {kPlaceNow, 30'000}); }

const Rejection* rejection(const PlacementResult& r, const std::string& node) {
  for (const Rejection& x : r.rejected)
    if (x.node_id == node) return &x;
  return nullptr;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Placement, TooBigModelGoesToTheCabledGroupNotTheSingleMachines) {
  // 70B in Q4_0 is about 40 GB: no 48 GiB machine holds it (75 % usable), two cabled ones do.
  const auto r = run(demand(kBig), {view(single("fast-single", 48, 800), kPlaceNow), view(group("pair", 2, 48, 200), kPlaceNow),
                                    view(single("other-single", 48, 400), kPlaceNow)});
  ASSERT_TRUE(r.choice) << r.why_not(demand(kBig));
  EXPECT_EQ(r.choice->node_id, "pair");
  EXPECT_EQ(r.choice->plan.candidate.ranks(), 2) << r.choice->reason;
  EXPECT_TRUE(contains(r.choice->reason, "pair")) << r.choice->reason;
  for (const char* id : {"fast-single", "other-single"}) {
    const Rejection* x = rejection(r, id);
    ASSERT_NE(x, nullptr) << id;
    EXPECT_TRUE(x->lasting);
    EXPECT_TRUE(contains(x->why, "nothing fits")) << x->why;
  }
  // A small model fits the fast single machine, which then beats the group.
  const auto small = run(demand(kSmall), {view(single("fast-single", 48, 800), kPlaceNow), view(group("pair", 2, 48, 200), kPlaceNow)});
  ASSERT_TRUE(small.choice);
  EXPECT_EQ(small.choice->node_id, "fast-single");
}

TEST(Placement, FasterNodeWins) {
  const auto r = run(demand(kSmall), {view(single("slow", 64, 100), kPlaceNow), view(single("fast", 64, 400), kPlaceNow)});
  ASSERT_TRUE(r.choice);
  EXPECT_EQ(r.choice->node_id, "fast");
  EXPECT_GT(r.choice->plan.tg_tps, 0);
  EXPECT_TRUE(contains(r.choice->reason, "next best node 'slow'")) << r.choice->reason;
}

TEST(Placement, LoadedNodeLosesToAnIdleSlowerOne) {
  NodeInfo busy = single("fast-but-loaded", 64, 400);
  busy.state.load = 0.8;  // 400 × 0.2 < 250 × 0.9
  const auto r = run(demand(kSmall), {view(busy, kPlaceNow), view(single("idle", 64, 250), kPlaceNow)});
  ASSERT_TRUE(r.choice);
  EXPECT_EQ(r.choice->node_id, "idle");
  // Jobs the store has assigned since the last heartbeat count as load too.
  NodeInfo two_slots = single("two-slots", 64, 400);
  two_slots.max_jobs = 2;
  NodeView v = view(two_slots, kPlaceNow);
  v.active_jobs = 1;  // half its slots in use: 400 × 0.5 < 250
  const auto s = run(demand(kSmall), {v, view(single("idle", 64, 250), kPlaceNow)});
  ASSERT_TRUE(s.choice);
  EXPECT_EQ(s.choice->node_id, "idle");
  EXPECT_DOUBLE_EQ(run(demand(kSmall), {v}).choice->load, 0.5);
}

TEST(Placement, LessReliableNodeLosesATie) {
  const auto r = run(demand(kSmall), {view(single("flaky", 64, 300), kPlaceNow, 0.5), view(single("steady", 64, 300), kPlaceNow)});
  ASSERT_TRUE(r.choice);
  EXPECT_EQ(r.choice->node_id, "steady");
}

TEST(Placement, DrainingBusyFullAndStaleNodesAreSkippedForNow) {
  NodeInfo draining = single("draining", 64, 900);
  draining.state.status = NodeStatus::Draining;
  NodeInfo busy = single("busy", 64, 800);
  busy.state.status = NodeStatus::Busy;
  NodeView full = view(single("full", 64, 700), kPlaceNow);
  full.active_jobs = 1;
  NodeView flagged = view(single("flagged", 64, 650), kPlaceNow);
  flagged.draining = true;  // the store's flag, set when its owner reclaims it
  const auto r = run(demand(kSmall), {view(draining, kPlaceNow), view(busy, kPlaceNow), full, flagged,
                                      view(single("stale", 64, 600), kPlaceNow - 31'000), view(single("ok", 64, 100), kPlaceNow)});
  ASSERT_TRUE(r.choice);
  EXPECT_EQ(r.choice->node_id, "ok");
  for (const auto& [id, why] : std::vector<std::pair<std::string, std::string>>{
           {"draining", "draining"}, {"busy", "busy"}, {"full", "its limit is 1"}, {"flagged", "draining"}, {"stale", "no heartbeat"}}) {
    const Rejection* x = rejection(r, id);
    ASSERT_NE(x, nullptr) << id;
    EXPECT_FALSE(x->lasting) << id;
    EXPECT_TRUE(contains(x->why, why)) << id << ": " << x->why;
  }
  // With only those, the job waits: it is not hopeless.
  const auto wait = run(demand(kSmall), {view(draining, kPlaceNow), view(single("stale", 64, 600), kPlaceNow - 31'000)});
  EXPECT_FALSE(wait.choice);
  EXPECT_FALSE(wait.hopeless());
}

TEST(Placement, NoFitIsAnErrorNamingWhyForEachNode) {
  NodeInfo short_ctx = single("short-context", 512, 400);
  short_ctx.max_context = 2048;
  const auto d = demand(kBig, 8192);
  const auto r = run(d, {view(single("no-model", 512, 400, {kSmall}), kPlaceNow), view(single("too-small", 16, 400), kPlaceNow),
                         view(short_ctx, kPlaceNow)});
  EXPECT_FALSE(r.choice);
  EXPECT_TRUE(r.hopeless());
  const std::string why = r.why_not(d);
  EXPECT_TRUE(contains(why, "no node can take this job (model 'big-70b', context 8192)")) << why;
  EXPECT_TRUE(contains(why, "node 'no-model': does not hold 'big-70b'")) << why;
  EXPECT_TRUE(contains(why, "node 'too-small': nothing fits")) << why;
  EXPECT_TRUE(contains(why, "node 'short-context': context 8192 exceeds its limit of 2048")) << why;
  // A lasting reason wins over a passing one: a stale node without the model is hopeless too.
  EXPECT_TRUE(run(d, {view(single("gone", 512, 400, {kSmall}), 0)}).hopeless());
  const auto none = run(d, {});
  EXPECT_TRUE(none.hopeless());
  EXPECT_TRUE(contains(none.why_not(d), "no node is registered"));
}

TEST(Placement, NeverCombinesMachinesOfDifferentNodes) {
  // Two 48 GiB singles together would hold the 70B model; as separate nodes they must not.
  const auto apart = run(demand(kBig), {view(single("a", 48, 400), kPlaceNow), view(single("b", 48, 400), kPlaceNow)});
  EXPECT_FALSE(apart.choice);
  EXPECT_TRUE(apart.hopeless());
  // The chosen plan uses only the chosen node's machines.
  const NodeInfo pair = group("pair", 2, 48, 200);
  const auto r = run(demand(kBig), {view(single("a", 48, 400), kPlaceNow), view(pair, kPlaceNow), view(single("b", 48, 400), kPlaceNow)});
  ASSERT_TRUE(r.choice);
  std::set<std::string> mine;
  for (const MachineInfo& m : pair.machines) mine.insert(m.name);
  for (const auto& nm : r.choice->plan.memory) EXPECT_TRUE(mine.count(nm.node)) << nm.node;
}

TEST(Placement, ClusterOfAGroupUsesItsMeasuredLink) {
  const auto c = cluster_of(group("pair", 3, 48, 200));
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_DOUBLE_EQ(c.link.latency_us(), 40);
  EXPECT_DOUBLE_EQ(c.link.gbs(), 1.1);
  EXPECT_NEAR(c.nodes[0].memory_gib, 48, 1e-9);
  EXPECT_DOUBLE_EQ(c.nodes[0].machine.mem_bw_gbs, 200);
}

TEST(Placement, ModelCostFollowsTheFileSize) {
  ModelInfo m = kSmall;
  const double shaped = cost_of(m).bytes;
  m.file_bytes = static_cast<uint64_t>(shaped * 2);
  const auto doubled = cost_of(m);
  EXPECT_NEAR(doubled.bytes, shaped * 2, 1);
  EXPECT_NEAR(doubled.held_bytes(0, doubled.n_layers, 1, true, true), shaped * 2, shaped * 1e-9);
}


// A node held while an audit of its work is confirmed takes no client's job, but may take an
// audit or a canary: two held nodes must be able to confirm each other's audits.
TEST(Placement, AHeldNodeTakesAuditsButNoClientsJobs) {
  NodeView held;
  held.info = single("held", 64, 200, {kSmall});
  held.last_heartbeat_ms = 1000;
  held.under_review = true;
  PlacementOptions o;
  o.now_ms = 2000;
  JobDemand job;
  job.model = kSmall.name;
  job.n_ctx = 4096;
  const PlacementResult r = place(job, {held}, o);
  ASSERT_FALSE(r.choice);
  EXPECT_NE(r.rejected.at(0).why.find("held: an audit of its work failed"), std::string::npos) << r.rejected.at(0).why;
  EXPECT_FALSE(r.rejected.at(0).lasting);
  job.verification = true;
  EXPECT_TRUE(place(job, {held}, o).choice);
}

}  // namespace
}  // namespace orchard::network
