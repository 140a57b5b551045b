// The placement index gives what place() over every node gives — the same node, score, reason,
// and the same refusal when none can take the job — while judging a handful of nodes, and a
// store's index follows what another coordinator writes to the same database.
#include "network/node_index.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "network/job_store.h"
#include "network/store_backends.h"
#include "nodes_fixture.h"

namespace orchard::network {
namespace {

using namespace testing;

const ModelInfo kMid = model("mid-8b-wide", "llama-3.1-8b");

NodeView random_view(int i, std::mt19937_64& rng, int64_t now) {
  const double gib = static_cast<double>(8 << (rng() % 5));  // 8 … 128 GiB
  // Few distinct bandwidths: many exact ties, which the order must break by node id.
  const double bw = 100.0 * static_cast<double>(1 + rng() % 4);
  std::vector<ModelInfo> models;
  if (rng() % 5) models.push_back(kSmall);
  if (rng() % 3 == 0) models.push_back(kBig);
  if (rng() % 4 == 0) models.push_back(kMid);
  NodeView v;
  v.info = rng() % 10 == 0 ? group("n" + std::to_string(i), 2, gib, bw, models) : single("n" + std::to_string(i), gib, bw, models);
  v.info.owner = "owner-" + std::to_string(rng() % 7);
  v.info.max_jobs = 1 + static_cast<int>(rng() % 4);
  v.info.max_context = rng() % 4 ? 32768 : 4096;
  v.info.state.load = rng() % 3 ? 0.0 : static_cast<double>(rng() % 100) / 100;
  if (rng() % 20 == 0) v.info.state.status = NodeStatus::Busy;
  v.last_heartbeat_ms = rng() % 15 ? now - 1000 : now - 120'000;
  v.reliability = rng() % 4 ? 1.0 : static_cast<double>(rng() % 100) / 100;
  v.draining = rng() % 25 == 0;
  v.active_jobs = static_cast<int>(rng() % static_cast<uint64_t>(v.info.max_jobs + 1));
  if (rng() % 30 == 0) v.banned = "caught";
  v.under_review = rng() % 30 == 0;
  if (rng() % 3 == 0) v.speed_ratio = static_cast<double>(rng() % 150) / 100;
  return v;
}

JobDemand random_job(std::mt19937_64& rng, int nodes) {
  JobDemand j;
  const char* names[] = {"small-8b", "big-70b", "mid-8b-wide", "nobody-has-it"};
  j.model = names[rng() % 20 == 0 ? 3 : rng() % 3];
  j.prompt_tokens = 1 + static_cast<int64_t>(rng() % 8000);
  j.max_tokens = 1 + static_cast<int64_t>(rng() % 2000);
  j.n_ctx = j.prompt_tokens + j.max_tokens + static_cast<int64_t>(rng() % 20000);
  if (rng() % 5 == 0) j.exclude_owners = {"owner-" + std::to_string(rng() % 7), "owner-" + std::to_string(rng() % 7)};
  if (rng() % 15 == 0) j.only_node = "n" + std::to_string(rng() % static_cast<uint64_t>(nodes + 2));
  j.verification = rng() % 6 == 0;
  return j;
}

void expect_same(const PlacementResult& got, const PlacementResult& want, const JobDemand& job, int round) {
  ASSERT_EQ(got.choice.has_value(), want.choice.has_value()) << "round " << round << ": " << want.why_not(job);
  if (want.choice) {
    EXPECT_EQ(got.choice->node_id, want.choice->node_id) << "round " << round;
    EXPECT_EQ(got.choice->score, want.choice->score) << "round " << round;
    EXPECT_EQ(got.choice->reason, want.choice->reason) << "round " << round;
  } else {
    EXPECT_EQ(got.why_not(job), want.why_not(job)) << "round " << round;
    EXPECT_EQ(got.hopeless(), want.hopeless()) << "round " << round;
  }
}

TEST(NodeIndex, ChoosesWhatPlaceChoosesOverEveryNodeThroughChanges) {
  std::mt19937_64 rng(7);
  const int64_t now = 10'000'000;
  const PlacementOptions o{now, 30'000};
  NodeIndex index;
  const int kNodes = 300;
  for (int i = 0; i < kNodes; ++i) index.update(random_view(i, rng, now));
  int chosen = 0;
  for (int round = 0; round < 600; ++round) {
    // Nodes change as a network's do: load, slots, bans, heartbeats, re-registration.
    for (int k = 0; k < 5; ++k) index.update(random_view(static_cast<int>(rng() % (kNodes + 20)), rng, now));
    const JobDemand job = random_job(rng, kNodes);
    expect_same(index.place(job, o), place(job, index.views(), o), job, round);
    if (::testing::Test::HasFailure()) return;
    chosen += index.place(job, o).choice.has_value();
  }
  EXPECT_GT(chosen, 300) << "most jobs should find a node, or the comparison says little";
}

TEST(NodeIndex, JudgesAFewNodesWhenManyAreFree) {
  std::mt19937_64 rng(3);
  const int64_t now = 10'000'000;
  NodeIndex index;
  for (int i = 0; i < 5000; ++i) {
    NodeView v;
    v.info = single("n" + std::to_string(i), 64, 100.0 + static_cast<double>(rng() % 700));
    v.info.max_jobs = 4;
    v.last_heartbeat_ms = now;
    index.update(std::move(v));
  }
  JobDemand job;
  job.model = "small-8b";
  size_t judged = 0;
  const PlacementResult r = index.place(job, {now, 30'000}, &judged);
  ASSERT_TRUE(r.choice);
  EXPECT_LE(judged, 4u) << "the best two free nodes, and no more than a tie or two past them";
  EXPECT_EQ(r.choice->node_id, place(job, index.views(), {now, 30'000}).choice->node_id);
}

class StoreIndexTest : public test::BackendTest {};

std::string submit(JobStore& s, int64_t t) {
  JobRequest req;
  req.client = "c";
  req.model = "small-8b";
  req.request = {{"api", kCompletionsApi}, {"body", {{"prompt", "x"}}}};
  return s.submit(req, t);
}
INSTANTIATE_TEST_SUITE_P(Backends, StoreIndexTest, ::testing::Values(test::Backend::SQLite, test::Backend::PostgreSQL),
                         test::backend_name);

// Two coordinators on one database: what one writes (a new, faster node; a node's jobs; a
// ban), the other's placements see at once.
TEST_P(StoreIndexTest, AnotherCoordinatorsWritesReachThisOnesPlacements) {
  const std::string at = fresh("index");
  auto a = JobStore::open(at);
  auto b = JobStore::open(at);
  const int64_t t = 1'000'000;
  NodeInfo slow = single("slow", 64, 100);
  slow.max_jobs = 1;
  a.register_node(slow, t);
  EXPECT_EQ(b.assign(submit(b, t), t).node_id, "slow");  // b's index read the node a registered
  // slow is full (b's own write); a registers a faster node: b places there.
  NodeInfo fast = single("fast", 64, 400);
  fast.max_jobs = 1;
  a.register_node(fast, t);
  EXPECT_EQ(b.assign(submit(b, t), t).node_id, "fast");
  // Both full: a third job waits. a finishes slow's job: b places the next one there.
  EXPECT_EQ(b.assign(submit(b, t), t).state, JobState::Queued);
  const auto w = a.next_job_for("slow", t);
  ASSERT_TRUE(w);
  a.complete(w->job_id, w->attempt, "slow", {1, 1, "stop"}, t);
  EXPECT_EQ(b.assign_queued(t).at(0).node_id, "slow");
  // The same views either way.
  EXPECT_EQ(b.nodes().size(), 2u);
}

// A coordinator's own placements change only what its index has counted already: its next
// passes read no node back (the number its change log took comes back with the commit and
// lets it skip them), while another coordinator's index reads each node they went to.
TEST_P(StoreIndexTest, ACoordinatorDoesNotReadItsOwnPlacementsBack) {
  const std::string at = fresh("own");
  auto a = JobStore::open(at);
  auto b = JobStore::open(at);
  const int64_t t = 1'000'000;
  for (const char* id : {"n1", "n2", "n3"}) {
    NodeInfo n = single(id, 64, 100);
    n.max_jobs = 2;  // room for the six jobs below
    a.register_node(n, t);
  }
  a.warm_index();
  b.warm_index();
  const int64_t a_warm = a.index_rows_read(), b_warm = b.index_rows_read();
  EXPECT_EQ(a_warm, 3);
  std::set<std::string> used;
  for (int i = 0; i < 5; ++i) {
    const AssignResult r = a.assign(submit(a, t), t);
    ASSERT_EQ(r.state, JobState::Assigned);
    used.insert(r.node_id);
  }
  submit(a, t);
  EXPECT_EQ(a.assign_queued(t).size(), 1u);
  EXPECT_EQ(a.index_rows_read(), a_warm) << "a re-read nodes whose only change was its own placements";
  EXPECT_TRUE(b.assign_queued(t).empty());
  EXPECT_GE(b.index_rows_read() - b_warm, static_cast<int64_t>(used.size()));
  EXPECT_LE(b.index_rows_read() - b_warm, 3);
}

// The log of nodes whose jobs changed is pruned after its window. A coordinator that last
// looked before the pruned changes reads every node again: it still sees the job a pruned
// change ended.
TEST_P(StoreIndexTest, ACoordinatorBehindThePrunedChangesReadsEveryNodeAgain) {
  const std::string at = fresh("index-pruned");
  StoreOptions o;
  o.change_window_ms = 100;
  auto a = JobStore::open(at, o);
  auto b = JobStore::open(at, o);
  const int64_t t = 1'000'000;
  auto finish = [&](JobStore& s, const std::string& node) {
    const auto w = s.next_job_for(node, t);
    ASSERT_TRUE(w);
    s.complete(w->job_id, w->attempt, node, {1, 1, "stop"}, t);
  };
  NodeInfo slow = single("slow", 64, 100);
  slow.max_jobs = 1;
  a.register_node(slow, t);
  const std::string first = submit(b, t);
  EXPECT_EQ(b.assign(first, t).node_id, "slow");  // b's index: slow is full
  // Cancelled: slow is free, which only the log says (a completion rewrites the node's row).
  EXPECT_TRUE(a.cancel(first, t));
  NodeInfo fast = single("fast", 64, 400);
  fast.max_jobs = 1;
  a.register_node(fast, t);
  // Jobs on the fast node for several windows: the log keeps only their latest changes.
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(a.assign(submit(a, t), t).node_id, "fast");
    finish(a, "fast");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    auto db = sql::open_database(at, {"job store", "orchard-jobs", "8", ""});
    sql::Stmt pruned(*db, "SELECT below, (SELECT count(*) FROM node_changes WHERE node_id = 'slow') FROM node_changes_pruned");
    ASSERT_TRUE(pruned.step());
    EXPECT_GT(pruned.i64(0), 0) << "the log was pruned";
    EXPECT_EQ(pruned.i64(1), 0) << "the change that freed slow is gone";
  }
  EXPECT_EQ(b.assign(submit(b, t), t).node_id, "fast");
  EXPECT_EQ(b.assign(submit(b, t), t).node_id, "slow") << "b still knows slow is free";
}

}  // namespace
}  // namespace orchard::network
