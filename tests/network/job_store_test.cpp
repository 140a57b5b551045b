// The job store: a job's whole life, leases and who may report on them, resuming after an
// abandoned attempt, drain versus abandonment, exactly-once completion, surviving a reopen, and
// two connections claiming from one database at once. Every test runs on SQLite and PostgreSQL.
#include "network/job_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "network/protocol_names.h"
#include "network/database.h"
#include "network/ledger.h"
#include "network/nodes_fixture.h"
#include "network/store_backends.h"

namespace orchard::network {
namespace {

namespace fs = std::filesystem;
using namespace orchard::network::testing;

constexpr int64_t kT0 = 1'700'000'000'000;  // the tests' clock starts here

StoreOptions options() {
  StoreOptions o;
  o.lease_ms = 10'000;
  o.heartbeat_timeout_ms = 15'000;
  o.max_attempts = 3;
  o.queue_timeout_ms = 60'000;
  return o;
}

JobRequest request(const std::string& id, const ModelInfo& m = kSmall, int64_t max_tokens = 16) {
  JobRequest r;
  r.id = id;
  r.client = "client-1";
  r.model = m.name;
  r.request = {{"model", m.name}, {"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", max_tokens}};
  r.n_ctx = 4096;
  r.prompt_tokens = 12;
  r.max_tokens = max_tokens;
  return r;
}

class JobStoreTest : public test::BackendTest {
 protected:
  std::string fresh_path(const std::string& name) { return fresh("jobs-" + name); }
  // A fresh store with `nodes` registered at kT0 and one job queued (when `job` is not empty).
  JobStore store_with(const std::string& name, const std::vector<NodeInfo>& nodes, const std::string& job = "") {
    auto store = JobStore::open(fresh_path(name), options());
    for (const NodeInfo& n : nodes) store.register_node(n, kT0);
    if (!job.empty()) store.submit(request(job), kT0);
    return store;
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, JobStoreTest, ::testing::Values(test::Backend::SQLite, test::Backend::PostgreSQL),
                         test::backend_name);

// The number of live attempts of `job`, read straight from the database.
int64_t live_attempts(const std::string& path, const std::string& job) {
  auto db = sql::open_database(path, {"job store", "orchard-jobs", "8", ""});
  sql::Stmt s(*db, "SELECT count(*) FROM attempts WHERE job_id = ?1 AND state IN ('assigned', 'running')");
  s.bind(1, job).step();
  return s.i64(0);
}

template <class F>
std::string not_your_job(F f) {
  try {
    f();
  } catch (const NotYourJob& e) {
    return e.what();
  }
  return "";
}

TEST_P(JobStoreTest, SubmitAssignStreamComplete) {
  auto store = JobStore::open(fresh_path("life"), options());
  NodeInfo node = single("n1", 64, 200);
  node.lending = Lending::Dedicated;
  store.register_node(node, kT0);
  const std::string id = store.submit(request("job-a"), kT0);
  EXPECT_EQ(id, "job-a");
  EXPECT_EQ(store.job(id).state, JobState::Queued);

  const auto work = store.next_job_for("n1", kT0 + 100);
  ASSERT_TRUE(work);
  EXPECT_EQ(work->job_id, "job-a");
  EXPECT_EQ(work->attempt, 1);
  EXPECT_EQ(work->model, "small-8b");
  EXPECT_EQ(work->request["messages"][0]["content"], "Hello");
  EXPECT_TRUE(work->output.empty());
  EXPECT_EQ(work->lease_deadline_ms, kT0 + 100 + 10'000);
  EXPECT_EQ(work->plan, "single");
  EXPECT_EQ(store.job(id).state, JobState::Running);
  EXPECT_FALSE(store.next_job_for("n1", kT0 + 200));  // nothing else to do

  for (int i = 0; i < 3; ++i) EXPECT_TRUE(store.append_output(id, 1, "n1", i, "tok" + std::to_string(i), kT0 + 300 + i));
  EXPECT_FALSE(store.append_output(id, 1, "n1", 1, "tok1", kT0 + 400));  // a retried append
  EXPECT_THROW(store.append_output(id, 1, "n1", 1, "other", kT0 + 400), Error);
  EXPECT_THROW(store.append_output(id, 1, "n1", 5, "gap", kT0 + 400), Error);
  EXPECT_THROW(store.append_output(id, 1, "n1", 16, "past max_tokens", kT0 + 400), Error);

  const Completion c = store.complete(id, 1, "n1", {12, 3, "length"}, kT0 + 500);
  EXPECT_TRUE(c.first);
  EXPECT_EQ(c.client, "client-1");
  EXPECT_EQ(c.owner, "owner-n1");
  EXPECT_EQ(c.usage.prompt_tokens, 12u);
  EXPECT_EQ(c.usage.generated_tokens, 3u);
  EXPECT_EQ(c.usage.size, SizeClass::Small);
  EXPECT_EQ(c.usage.hardware, HardwareClass::Laptop) << "unmeasured: the node's own 'desktop' label does not count";
  EXPECT_TRUE(c.usage.dedicated);
  EXPECT_GT(job_credits(c.usage), 0);

  const JobStatus st = store.job(id);
  EXPECT_EQ(st.state, JobState::Done);
  EXPECT_EQ(st.output, (std::vector<std::string>{"tok0", "tok1", "tok2"}));
  ASSERT_TRUE(st.usage);
  EXPECT_EQ(st.usage->generated_tokens, 3);
  EXPECT_EQ(st.usage->finish_reason, "length");
  EXPECT_EQ(st.node_id, "n1");
  const NodeStats ns = store.node_stats("n1");
  EXPECT_EQ(ns.jobs_served, 1);
  EXPECT_EQ(ns.tokens_generated, 3);
  EXPECT_EQ(ns.tokens_streamed, 3);
  EXPECT_EQ(ns.active_jobs, 0);
  EXPECT_DOUBLE_EQ(ns.reliability, 1.0);
  EXPECT_THROW(store.append_output(id, 1, "n1", 3, "after the end", kT0 + 600), NotYourJob);
}

// Two agents on one key (so one node id) under different owners: while the first heartbeats,
// the second's registration is refused naming both owners, so the first's jobs stay credited
// to its owner; once the first is silent past the timeout, the key's new owner may take over.
TEST_P(JobStoreTest, ASecondAgentOnOneKeyUnderAnotherOwnerIsRefusedWhileTheFirstLives) {
  NodeInfo bob = single("n1", 64, 200);
  bob.owner = "bob";
  auto store = store_with("two-owners", {bob});
  NodeInfo carol = bob;
  carol.owner = "carol";
  try {
    store.register_node(carol, kT0 + 1'000);
    FAIL() << "a second owner took over a live node";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'bob'"), std::string::npos) << m;
    EXPECT_NE(m.find("'carol'"), std::string::npos) << m;
    EXPECT_NE(m.find("--key"), std::string::npos) << m;
  }
  auto owner = [&] { return store.nodes().at(0).info.owner; };
  store.register_node(bob, kT0 + 2'000);  // the same owner again (a restart) is fine
  EXPECT_EQ(owner(), "bob");
  store.register_node(carol, kT0 + 2'000 + options().heartbeat_timeout_ms + 1);
  EXPECT_EQ(owner(), "carol");
}

TEST_P(JobStoreTest, ANodeCannotReportWorkOnAnotherNodesJob) {
  auto store = store_with("not-yours", {single("fast", 64, 400), single("slow", 64, 100)}, "job-b");
  const AssignResult a = store.assign("job-b", kT0);
  ASSERT_EQ(a.state, JobState::Assigned) << a.reason;
  EXPECT_EQ(a.node_id, "fast");
  EXPECT_FALSE(store.next_job_for("slow", kT0 + 1));  // not offered to the other node

  const std::string e1 = not_your_job([&] { store.append_output("job-b", 1, "slow", 0, "forged", kT0 + 2); });
  EXPECT_NE(e1.find("not your job"), std::string::npos) << e1;
  EXPECT_NE(not_your_job([&] { store.complete("job-b", 1, "slow", {1, 1, "stop"}, kT0 + 2); }), "");
  EXPECT_NE(not_your_job([&] { store.hand_back("job-b", 1, "slow", kT0 + 2); }), "");
  EXPECT_NE(not_your_job([&] { store.append_output("job-b", 7, "fast", 0, "no such attempt", kT0 + 2); }).find("no such attempt"),
            std::string::npos);
  EXPECT_TRUE(store.job("job-b").output.empty());
  EXPECT_EQ(store.job("job-b").state, JobState::Assigned);
  EXPECT_EQ(store.node_stats("slow").tokens_streamed, 0);
  // The holder still can.
  EXPECT_TRUE(store.append_output("job-b", 1, "fast", 0, "real", kT0 + 3));
}

TEST_P(JobStoreTest, LeaseExpiryRequeuesKeepingOutputAndTheNextAttemptResumes) {
  auto store = store_with("resume", {single("fast", 64, 400), single("slow", 64, 100)}, "job-c");
  const auto first = store.next_job_for("fast", kT0);
  ASSERT_TRUE(first);
  store.append_output("job-c", 1, "fast", 0, "Once", kT0 + 1'000, {9038});
  store.append_output("job-c", 1, "fast", 1, " upon", kT0 + 2'000, {2501, 17});

  // The slow node keeps heart-beating; the fast one falls silent. Nothing expires early.
  store.heartbeat("slow", {}, kT0 + 10'000);
  EXPECT_TRUE(store.expire(kT0 + 11'000).abandoned.empty());  // lease (renewed at +2 s) runs to +12 s
  store.heartbeat("slow", {}, kT0 + 20'000);
  const ExpireReport r = store.expire(kT0 + 20'000);
  ASSERT_EQ(r.abandoned.size(), 1u);
  EXPECT_EQ(r.abandoned[0], (std::pair<std::string, int64_t>{"job-c", 1}));
  EXPECT_EQ(r.requeued, std::vector<std::string>{"job-c"});
  const JobStatus queued = store.job("job-c");
  EXPECT_EQ(queued.state, JobState::Queued);
  EXPECT_EQ(queued.output, (std::vector<std::string>{"Once", " upon"}));
  EXPECT_LT(store.node_stats("fast").reliability, 1.0);
  EXPECT_EQ(store.node_stats("fast").abandoned, 1);
  // The old holder's late report is refused.
  EXPECT_NE(not_your_job([&] { store.append_output("job-c", 1, "fast", 2, " a", kT0 + 20'001); }), "");

  // The stale fast node is skipped; the slow one resumes after the streamed tokens.
  const auto second = store.next_job_for("slow", kT0 + 20'500);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->attempt, 2);
  EXPECT_EQ(second->output, (std::vector<std::string>{"Once", " upon"}));
  // Each chunk's tokens come back with it: what the next node feeds after the prompt.
  EXPECT_EQ(second->output_tokens, (std::vector<std::vector<int32_t>>{{9038}, {2501, 17}}));
  EXPECT_TRUE(store.append_output("job-c", 2, "slow", 2, " a", kT0 + 21'000));
  EXPECT_TRUE(store.append_output("job-c", 2, "slow", 3, " time", kT0 + 21'100));
  EXPECT_TRUE(store.complete("job-c", 2, "slow", {12, 4, "stop"}, kT0 + 21'200).first);
  const JobStatus done = store.job("job-c");
  EXPECT_EQ(done.state, JobState::Done);
  EXPECT_EQ(done.output, (std::vector<std::string>{"Once", " upon", " a", " time"}));
  EXPECT_EQ(done.attempts, 2);
  EXPECT_EQ(store.node_stats("slow").tokens_streamed, 2);
  EXPECT_EQ(store.node_stats("fast").tokens_streamed, 2);
}

TEST_P(JobStoreTest, HandBackCostsNothingAbandonmentLowersReliability) {
  auto store = store_with("drain", {single("owner-wants-it", 64, 400), single("other", 64, 100)}, "job-d");
  ASSERT_TRUE(store.next_job_for("owner-wants-it", kT0));
  store.append_output("job-d", 1, "owner-wants-it", 0, "Hi", kT0 + 100);

  // The owner reclaims the machine: the node says it is draining and hands the job back.
  store.heartbeat("owner-wants-it", {0.0, NodeStatus::Draining, std::nullopt}, kT0 + 200);
  store.hand_back("job-d", 1, "owner-wants-it", kT0 + 300);
  store.hand_back("job-d", 1, "owner-wants-it", kT0 + 301);  // a repeat changes nothing
  NodeStats drained = store.node_stats("owner-wants-it");
  EXPECT_DOUBLE_EQ(drained.reliability, 1.0);
  EXPECT_EQ(drained.handed_back, 1);
  EXPECT_EQ(drained.abandoned, 0);
  EXPECT_TRUE(drained.draining);
  EXPECT_EQ(store.job("job-d").state, JobState::Queued);
  EXPECT_EQ(store.job("job-d").output, std::vector<std::string>{"Hi"});
  // The faster node is draining: the job goes to the other one, with the streamed token.
  const auto next = store.next_job_for("other", kT0 + 400);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->attempt, 2);
  EXPECT_EQ(next->output, std::vector<std::string>{"Hi"});

  // Abandonment: the other node goes silent past the heartbeat timeout.
  const ExpireReport r = store.expire(kT0 + 400 + 15'001);
  EXPECT_EQ(r.abandoned.size(), 1u);
  const NodeStats abandoned = store.node_stats("other");
  EXPECT_NEAR(abandoned.reliability, options().abandon_factor, 1e-12);
  EXPECT_EQ(abandoned.abandoned, 1);
  // Hand-backs do not count towards max_attempts: one abandonment so far, still queued.
  EXPECT_EQ(store.job("job-d").state, JobState::Queued);
}

TEST_P(JobStoreTest, CompletingTwiceIsIdempotent) {
  auto store = store_with("twice", {single("n1", 64, 200)}, "job-e");
  ASSERT_TRUE(store.next_job_for("n1", kT0));
  store.append_output("job-e", 1, "n1", 0, "x", kT0 + 1);
  const Completion a = store.complete("job-e", 1, "n1", {12, 1, "stop"}, kT0 + 2);
  const Completion b = store.complete("job-e", 1, "n1", {99, 99, "length"}, kT0 + 3);  // a retry, maybe with other numbers
  EXPECT_TRUE(a.first);
  EXPECT_FALSE(b.first);
  EXPECT_EQ(b.usage.prompt_tokens, 12u);
  EXPECT_EQ(b.usage.generated_tokens, 1u);
  EXPECT_EQ(job_credits(a.usage), job_credits(b.usage));
  EXPECT_EQ(store.node_stats("n1").jobs_served, 1);
  EXPECT_EQ(store.job("job-e").usage->generated_tokens, 1);
  // Submitting the same job again (a client's retry) changes nothing; another job under the id is refused.
  EXPECT_EQ(store.submit(request("job-e"), kT0 + 4), "job-e");
  EXPECT_EQ(store.job("job-e").state, JobState::Done);
  EXPECT_THROW(store.submit(request("job-e", kBig), kT0 + 4), Error);
  EXPECT_EQ(store.submit(request(""), kT0 + 5).rfind("job-", 0), 0u);
}

TEST_P(JobStoreTest, ReopeningMidJobKeepsEverything) {
  const std::string path = fresh_path("reopen");
  {
    auto store = JobStore::open(path, options());
    store.register_node(single("n1", 64, 200), kT0);
    store.submit(request("job-f"), kT0);
    store.submit(request("job-g"), kT0 + 1);
    ASSERT_TRUE(store.next_job_for("n1", kT0 + 10));
    store.append_output("job-f", 1, "n1", 0, "al", kT0 + 20);
    store.append_output("job-f", 1, "n1", 1, "pha", kT0 + 30);
  }  // the coordinator stops mid-job
  auto store = JobStore::open(path, options());
  const JobStatus f = store.job("job-f");
  EXPECT_EQ(f.state, JobState::Running);
  EXPECT_EQ(f.output, (std::vector<std::string>{"al", "pha"}));
  EXPECT_EQ(f.node_id, "n1");
  EXPECT_EQ(store.job("job-g").state, JobState::Queued);
  EXPECT_EQ(store.node_stats("n1").active_jobs, 1);
  store.heartbeat("n1", {0.5, NodeStatus::Available, std::vector<std::string>{"job-f"}}, kT0 + 5'000);
  EXPECT_TRUE(store.append_output("job-f", 1, "n1", 2, "bet", kT0 + 6'000));
  EXPECT_TRUE(store.complete("job-f", 1, "n1", {12, 3, "stop"}, kT0 + 7'000).first);
  // The other job still waits for a slot and then runs.
  const auto g = store.next_job_for("n1", kT0 + 8'000);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->job_id, "job-g");
  // Someone else's database is refused (PostgreSQL keeps each kind in a schema of its own).
  if (!sqlite()) return;
  const std::string ledger_like = fresh_path("not-jobs");
  sql::open_database(ledger_like, {"ledger", "orchard-ledger", "1", "CREATE TABLE entries(seq INTEGER PRIMARY KEY);"});
  try {
    JobStore::open(ledger_like);
    FAIL() << "opened a ledger as a job store";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an Orchard job store"), std::string::npos) << e.what();
  }
}

TEST_P(JobStoreTest, HeartbeatRenewsOnlyTheJobsTheNodeStillRuns) {
  auto store = JobStore::open(fresh_path("dropped"), options());
  NodeInfo two = single("n1", 64, 200);
  two.max_jobs = 2;
  store.register_node(two, kT0);
  store.submit(request("kept"), kT0);
  store.submit(request("dropped"), kT0 + 1);
  ASSERT_TRUE(store.next_job_for("n1", kT0 + 10));
  ASSERT_TRUE(store.next_job_for("n1", kT0 + 20));
  // The node lives on but lost "dropped" (a crashed worker): it lists only "kept".
  for (int64_t t = kT0 + 5'000; t <= kT0 + 20'000; t += 5'000)
    store.heartbeat("n1", {0.5, NodeStatus::Available, std::vector<std::string>{"kept"}}, t);
  const ExpireReport r = store.expire(kT0 + 20'000);
  ASSERT_EQ(r.abandoned.size(), 1u);
  EXPECT_EQ(r.abandoned[0].first, "dropped");
  EXPECT_EQ(store.job("kept").state, JobState::Running);
  EXPECT_EQ(store.job("dropped").state, JobState::Queued);
}

TEST_P(JobStoreTest, JobsNoNodeCanTakeFailWithAClearError) {
  auto store = store_with("hopeless", {single("tiny", 16, 200, {kSmall, kBig}), single("no-big", 512, 200, {kSmall})});
  store.submit(request("too-big", kBig), kT0);
  const AssignResult a = store.assign("too-big", kT0);
  EXPECT_EQ(a.state, JobState::Failed);
  const JobStatus st = store.job("too-big");
  EXPECT_EQ(st.state, JobState::Failed);
  EXPECT_NE(st.error.find("no node can take this job"), std::string::npos) << st.error;
  EXPECT_NE(st.error.find("node 'tiny': nothing fits"), std::string::npos) << st.error;
  EXPECT_NE(st.error.find("node 'no-big': does not hold 'big-70b'"), std::string::npos) << st.error;

  // A job that could run but finds every node busy waits, then fails after the queue timeout.
  store.submit(request("first"), kT0);
  store.submit(request("second"), kT0 + 1);
  store.heartbeat("tiny", {1.0, NodeStatus::Busy, std::nullopt}, kT0 + 2);
  ASSERT_TRUE(store.next_job_for("no-big", kT0 + 3));
  EXPECT_EQ(store.assign("second", kT0 + 4).state, JobState::Queued);
  EXPECT_NE(store.job("second").waiting.find("node 'tiny': busy"), std::string::npos) << store.job("second").waiting;
  for (int64_t t = kT0 + 5'000; t <= kT0 + 65'000; t += 5'000) {
    store.heartbeat("no-big", {}, t);
    store.heartbeat("tiny", {1.0, NodeStatus::Busy, std::nullopt}, t);
  }
  const ExpireReport r = store.expire(kT0 + 65'000);
  EXPECT_EQ(r.failed, std::vector<std::string>{"second"});
  const JobStatus second = store.job("second");
  EXPECT_EQ(second.state, JobState::Failed);
  EXPECT_NE(second.error.find("no node took this job within 60 s; at the last try: "), std::string::npos) << second.error;
  EXPECT_EQ(store.job("first").state, JobState::Running);
}

TEST_P(JobStoreTest, AJobAbandonedMaxAttemptsTimesFails) {
  auto store = JobStore::open(fresh_path("max-attempts"), options());
  int64_t t = kT0;
  store.register_node(single("n1", 64, 200), t);
  store.submit(request("cursed"), t);
  for (int i = 1; i <= 3; ++i) {
    store.register_node(single("n1", 64, 200), t);  // it comes back, takes the job, and vanishes again
    const auto w = store.next_job_for("n1", t);
    ASSERT_TRUE(w) << i;
    EXPECT_EQ(w->attempt, i);
    t += 16'000;
    store.expire(t);
  }
  const JobStatus st = store.job("cursed");
  EXPECT_EQ(st.state, JobState::Failed);
  EXPECT_NE(st.error.find("abandoned 3 times (the limit is 3); last by node 'n1'"), std::string::npos) << st.error;
  EXPECT_NEAR(store.node_stats("n1").reliability, 0.7 * 0.7 * 0.7, 1e-12);
}

TEST_P(JobStoreTest, TwoConnectionsClaimingAtOnceNeverGiveAJobToTwoNodes) {
  const std::string path = fresh_path("race");
  constexpr int kJobs = 60;
  {
    auto store = JobStore::open(path, options());
    for (const char* id : {"n1", "n2", "n3", "n4"}) {
      NodeInfo n = single(id, 64, 200);
      n.max_jobs = kJobs;  // every node would take every job: only the claim decides
      store.register_node(n, kT0);
    }
    for (int i = 0; i < kJobs; ++i) store.submit(request("race-" + std::to_string(i)), kT0 + i);
  }
  std::mutex mu;
  std::map<std::string, std::vector<std::string>> given;  // job → nodes it was handed to
  auto worker = [&](std::vector<std::string> nodes) {
    auto store = JobStore::open(path, options());
    for (int round = 0; round < kJobs; ++round) {
      for (const std::string& n : nodes) {
        if (round % 3 == 0) store.assign_queued(kT0 + 1'000);
        while (auto w = store.next_job_for(n, kT0 + 1'000)) {
          std::lock_guard<std::mutex> lock(mu);
          given[w->job_id].push_back(n);
        }
      }
    }
  };
  std::thread a(worker, std::vector<std::string>{"n1", "n2"});
  std::thread b(worker, std::vector<std::string>{"n3", "n4"});
  a.join();
  b.join();
  // Jobs one thread assigned to the other's nodes after that one stopped polling.
  auto store = JobStore::open(path, options());
  for (const char* n : {"n1", "n2", "n3", "n4"})
    while (auto w = store.next_job_for(n, kT0 + 2'000)) given[w->job_id].push_back(n);
  EXPECT_EQ(given.size(), static_cast<size_t>(kJobs));
  std::set<std::string> nodes_used;
  for (const auto& [job, nodes] : given) {
    EXPECT_EQ(nodes.size(), 1u) << job;
    EXPECT_EQ(live_attempts(path, job), 1) << job;
    nodes_used.insert(nodes.begin(), nodes.end());
  }
  EXPECT_GT(nodes_used.size(), 1u);  // the load term spreads equal nodes' work
  for (int i = 0; i < kJobs; ++i) EXPECT_EQ(store.job("race-" + std::to_string(i)).attempts, 1);
}

// Three replicas — each its own connections to the store and the ledger — claim, complete
// and pay at once, then each pays every completion it finds (what a restarted coordinator
// does): every job runs on one node and is paid once, and the ledger verifies.
TEST_P(JobStoreTest, ReplicasClaimingCompletingAndPayingAtOnceAssignAndPayEachJobOnce) {
  const std::string jobs_at = fresh_path("replicas");
  const std::string ledger_at = sqlite() ? fresh_path("replicas-ledger") : jobs_at;
  constexpr int kJobs = 45, kReplicas = 3;
  {
    auto store = JobStore::open(jobs_at, options());
    for (int n = 0; n < 6; ++n) {
      NodeInfo info = single("n" + std::to_string(n), 64, 200);
      info.owner = "owner-" + std::to_string(n);
      info.max_jobs = 2;
      store.register_node(info, kT0);
    }
    for (int i = 0; i < kJobs; ++i) store.submit(request("pay-" + std::to_string(i)), kT0 + i);
    Ledger::open(ledger_at);
  }
  std::mutex mu;
  std::map<std::string, int> claimed;  // job → times a node was handed it
  std::atomic<int> completed{0};
  auto replica = [&](int r) {
    auto store = JobStore::open(jobs_at, options());
    auto ledger = Ledger::open(ledger_at);
    auto pay = [&](const Completion& c) {
      ledger.pay(c.job_id, c.attempt, c.client, c.owner, job_credits(c.usage), to_json(c.usage));
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (completed < kJobs && std::chrono::steady_clock::now() < deadline)
      for (int n = r; n < 6; n += kReplicas)  // each replica serves its own nodes
        while (auto w = store.next_job_for("n" + std::to_string(n), kT0 + 1'000)) {
          {
            std::lock_guard<std::mutex> lock(mu);
            ++claimed[w->job_id];
          }
          pay(store.complete(w->job_id, w->attempt, "n" + std::to_string(n), {12, 4, "stop"}, kT0 + 2'000));
          ++completed;
        }
    for (const Completion& c : store.completions()) pay(c);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) threads.emplace_back(replica, r);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(claimed.size(), static_cast<size_t>(kJobs));
  for (const auto& [job, times] : claimed) EXPECT_EQ(times, 1) << job;
  auto ledger = Ledger::open(ledger_at);
  const VerifyReport r = ledger.verify();
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.violations.front());
  EXPECT_EQ(r.entries, kJobs);
  for (int i = 0; i < kJobs; ++i) EXPECT_TRUE(ledger.entry_for_job("pay-" + std::to_string(i))) << i;
}

TEST_P(JobStoreTest, TheFileRefusesASecondLiveAttempt) {
  const std::string path = fresh_path("unique");
  auto store = JobStore::open(path, options());
  store.register_node(single("n1", 64, 200), kT0);
  store.submit(request("job-u"), kT0);
  ASSERT_EQ(store.assign("job-u", kT0).state, JobState::Assigned);
  EXPECT_EQ(store.assign("job-u", kT0).reason, "not queued: already assigned");
  auto db = sql::open_database(path, {"job store", "orchard-jobs", "8", ""});
  EXPECT_THROW(db->exec("INSERT INTO attempts(job_id, attempt, node_id, state, plan, size_class, hardware, dedicated, "
                         "started_at, lease_deadline) VALUES('job-u', 2, 'n1', 'running', 'single', 'small', 'desktop', 0, 0, 0)"),
               sql::SqlError);
}

// A chunk retried with other tokens is as wrong as one with other text.
TEST_P(JobStoreTest, AChunkIsStoredWithItsTokensAndARetryMustRepeatThem) {
  auto store = store_with("chunk-tokens", {single("n1", 64, 200)}, "job-t");
  ASSERT_TRUE(store.next_job_for("n1", kT0));
  EXPECT_TRUE(store.append_output("job-t", 1, "n1", 0, "Hi", kT0 + 1, {5, 6}));
  EXPECT_FALSE(store.append_output("job-t", 1, "n1", 0, "Hi", kT0 + 2, {5, 6}));
  EXPECT_THROW(store.append_output("job-t", 1, "n1", 0, "Hi", kT0 + 3, {5}), Error);
}

TEST_P(JobStoreTest, RegistrationRecordsTheNodesKeyAndKeepsItWhenNoneIsGiven) {
  auto store = JobStore::open(fresh_path("keys"), options());
  EXPECT_EQ(store.node_key("n1"), std::nullopt);
  store.register_node(single("n1", 64, 200), kT0);
  EXPECT_EQ(store.node_key("n1"), std::nullopt);  // registered without a key
  store.register_node(single("n1", 64, 200), kT0 + 1, std::string(64, 'a'));
  EXPECT_EQ(store.node_key("n1"), std::string(64, 'a'));
  store.register_node(single("n1", 64, 200), kT0 + 2);
  EXPECT_EQ(store.node_key("n1"), std::string(64, 'a'));
}

TEST_P(JobStoreTest, ANodeThatCannotRunAJobFailsItForEveryoneAndOnlyItsOwn) {
  auto store = store_with("node-fails", {single("n1", 64, 200), single("n2", 64, 100)}, "job-x");
  const auto work = store.next_job_for("n1", kT0);
  ASSERT_TRUE(work);
  EXPECT_NE(not_your_job([&] { store.fail("job-x", 1, "n2", "not mine to fail", kT0 + 1); }), "");
  store.fail("job-x", 1, "n1", "the prompt does not fit", kT0 + 2);
  store.fail("job-x", 1, "n1", "the prompt does not fit", kT0 + 3);  // a retry changes nothing
  const JobStatus st = store.job("job-x");
  EXPECT_EQ(st.state, JobState::Failed);
  EXPECT_NE(st.error.find("the prompt does not fit"), std::string::npos) << st.error;
  EXPECT_NE(st.error.find("n1"), std::string::npos) << st.error;
  EXPECT_FALSE(store.next_job_for("n2", kT0 + 4));  // not requeued
  EXPECT_NE(not_your_job([&] { store.complete("job-x", 1, "n1", {1, 1, "stop"}, kT0 + 5); }), "");
}

TEST_P(JobStoreTest, ACancelledJobRefusesItsNodeAndIsNeverPaidOrRequeued) {
  auto store = store_with("cancel", {single("n1", 64, 200)}, "job-c");
  const auto work = store.next_job_for("n1", kT0);
  ASSERT_TRUE(work);
  EXPECT_TRUE(store.append_output("job-c", 1, "n1", 0, "tok0", kT0 + 1));
  EXPECT_TRUE(store.cancel("job-c", kT0 + 2));
  EXPECT_FALSE(store.cancel("job-c", kT0 + 3));  // once
  EXPECT_NE(not_your_job([&] { store.append_output("job-c", 1, "n1", 1, "tok1", kT0 + 4); }), "");
  EXPECT_NE(not_your_job([&] { store.complete("job-c", 1, "n1", {1, 1, "length"}, kT0 + 5); }), "");
  const JobStatus st = store.job("job-c");
  EXPECT_EQ(st.state, JobState::Cancelled);
  EXPECT_EQ(st.output, std::vector<std::string>{"tok0"});
  EXPECT_FALSE(st.usage);
  EXPECT_TRUE(store.completions().empty());
  EXPECT_EQ(store.node_stats("n1").active_jobs, 0);  // the node is free
  EXPECT_TRUE(store.expire(kT0 + 60'000).requeued.empty());
  EXPECT_EQ(store.job("job-c").state, JobState::Cancelled);

  // A queued job is cancelled before any node sees it; a finished one is not.
  store.submit(request("job-q"), kT0 + 10);
  EXPECT_TRUE(store.cancel("job-q", kT0 + 11));
  EXPECT_FALSE(store.next_job_for("n1", kT0 + 13));
  store.submit(request("job-d"), kT0 + 20);
  const auto d = store.next_job_for("n1", kT0 + 20);
  ASSERT_TRUE(d);
  store.complete("job-d", 1, "n1", {1, 1, "stop"}, kT0 + 21);
  EXPECT_FALSE(store.cancel("job-d", kT0 + 22));
  EXPECT_EQ(store.job("job-d").state, JobState::Done);
  EXPECT_THROW(store.cancel("no-such-job", kT0 + 23), Error);

  // The world page's counts know the cancelled state too.
  const std::map<JobState, int64_t> want = {{JobState::Done, 1}, {JobState::Cancelled, 2}};
  EXPECT_EQ(store.job_counts(), want);
}

}  // namespace
}  // namespace orchard::network
