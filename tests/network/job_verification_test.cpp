// The job store's audits and settlements (docs/verification.md): payments wait for the audit
// window and for a running audit; an audit goes only to another owner's node holding the same
// file; a failed audit bans the node and forfeits what it had pending; a version 2 store is
// upgraded with its completed jobs due. Every test runs on SQLite and PostgreSQL.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "network/database.h"
#include "network/job_store.h"
#include "network/nodes_fixture.h"
#include "network/protocol_names.h"
#include "network/store_backends.h"

namespace orchard::network {
namespace {

using namespace orchard::network::testing;

constexpr int64_t kVerifyT0 = 1'700'000'000'000;

StoreOptions options(int64_t window_ms) {
  StoreOptions o;
  o.lease_ms = 10'000;
  o.heartbeat_timeout_ms = 15'000;
  o.queue_timeout_ms = 60'000;
  o.audit_window_ms = window_ms;
  return o;
}

ModelInfo small_with(const std::string& sha) {
  ModelInfo m = kSmall;
  m.sha256 = sha;
  return m;
}
const std::string kShaA(64, 'a'), kShaB(64, 'b');

NodeInfo node(const std::string& id, const std::string& owner, const std::string& sha = kShaA) {
  NodeInfo n = single(id, 64, 200, {small_with(sha)});
  n.owner = owner;
  return n;
}

JobRequest verify_request(const std::string& id) {
  JobRequest r;
  r.id = id;
  r.client = "client-1";
  r.model = kSmall.name;
  r.request = {{"api", "completions"}, {"body", {{"model", kSmall.name}, {"prompt", "Once upon a time"}, {"max_tokens", 8}}}};
  r.n_ctx = 4096;
  r.prompt_tokens = 5;
  r.max_tokens = 8;
  return r;
}

// Runs `job` on `node` to the end: three chunks of two tokens each (none when `with_tokens` is false).
Completion run_job(JobStore& st, const std::string& job, const std::string& node, int64_t now, bool with_tokens = true) {
  st.submit(verify_request(job), now);
  const auto w = st.next_job_for(node, now);
  if (!w || w->job_id != job) {
    ADD_FAILURE() << job << " was not given to " << node;
    return {};
  }
  for (int i = 0; i < 3; ++i)
    st.append_output(job, w->attempt, node, i, "t" + std::to_string(i), now + 1,
                     with_tokens ? std::vector<int32_t>{10 * i, 10 * i + 1} : std::vector<int32_t>{});
  return st.complete(job, w->attempt, node, {5, 6, "length"}, now + 2);
}

std::vector<std::string> due_ids(JobStore& st, int64_t now) {
  std::vector<std::string> out;
  for (const Completion& c : st.due_settlements(now)) out.push_back(c.job_id);
  return out;
}

class JobVerificationTest : public test::BackendTest {};
INSTANTIATE_TEST_SUITE_P(Backends, JobVerificationTest,
                         ::testing::Values(test::Backend::SQLite, test::Backend::PostgreSQL), test::backend_name);

TEST_P(JobVerificationTest, APaymentIsDueWhenTheAuditWindowClosesAndOnce) {
  auto st = JobStore::open(fresh("verify-window"), options(5'000));
  st.register_node(node("n1", "alice"), kVerifyT0);
  run_job(st, "job-1", "n1", kVerifyT0);
  EXPECT_EQ(st.settlement("job-1"), SettlementState::Pending);
  EXPECT_TRUE(due_ids(st, kVerifyT0 + 4'000).empty()) << "the window is still open";
  ASSERT_EQ(due_ids(st, kVerifyT0 + 5'002), std::vector<std::string>{"job-1"});
  const Completion c = st.due_settlements(kVerifyT0 + 5'002).front();
  EXPECT_EQ(c.owner, "alice");
  EXPECT_EQ(c.client, "client-1");
  EXPECT_EQ(c.usage.generated_tokens, 6u);
  EXPECT_EQ(st.node_stats("n1").pending_jobs, 1);
  st.mark_paid("job-1", kVerifyT0 + 5'003);
  EXPECT_EQ(st.settlement("job-1"), SettlementState::Paid);
  EXPECT_TRUE(due_ids(st, kVerifyT0 + 9'000).empty());
  EXPECT_EQ(st.node_stats("n1").pending_jobs, 0);
  EXPECT_FALSE(st.settlement("no-such-job"));
}

TEST_P(JobVerificationTest, AnAuditGoesOnlyToAnotherOwnersNodeWithTheSameFileAndHoldsThePayment) {
  auto st = JobStore::open(fresh("verify-route"), options(0));
  st.register_node(node("n1", "alice"), kVerifyT0);
  run_job(st, "job-1", "n1", kVerifyT0);
  st.register_node(node("n2", "alice"), kVerifyT0 + 10);         // the audited node's owner
  st.register_node(node("n3", "bob", kShaB), kVerifyT0 + 10);    // another file under the name
  st.register_node(node("n4", "carol"), kVerifyT0 + 10);         // the one that may audit
  const auto audit = st.submit_audit("job-1", kVerifyT0 + 20);
  ASSERT_TRUE(audit);
  EXPECT_EQ(audit->rfind("audit-", 0), 0u) << *audit;
  EXPECT_TRUE(due_ids(st, kVerifyT0 + 30).empty()) << "an audit is running";
  EXPECT_FALSE(st.next_job_for("n1", kVerifyT0 + 30));
  EXPECT_FALSE(st.next_job_for("n2", kVerifyT0 + 30));
  EXPECT_FALSE(st.next_job_for("n3", kVerifyT0 + 30));
  const auto w = st.next_job_for("n4", kVerifyT0 + 30);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->job_id, *audit);
  EXPECT_EQ(w->request["api"], kAuditApi);
  const AuditRequest a = audit_request_from_json(w->request["body"]);
  EXPECT_EQ(a.tokens, (std::vector<int32_t>{0, 1, 10, 11, 20, 21}));
  EXPECT_EQ(a.request, verify_request("job-1").request);

  const auto task = st.audit_task(*audit);
  ASSERT_TRUE(task);
  EXPECT_EQ(task->audited_job, "job-1");
  EXPECT_EQ(task->node_id, "n1");
  EXPECT_EQ(task->owner, "alice");
  EXPECT_EQ(task->tokens, 6u);
  EXPECT_FALSE(st.audit_task("job-1")) << "a client job is no audit";
  st.append_output(*audit, w->attempt, "n4", 0, "{}", kVerifyT0 + 40);
  const Completion done = st.complete(*audit, w->attempt, "n4", {0, 1, "stop"}, kVerifyT0 + 41);
  EXPECT_EQ(done.kind, kAuditJob);
  EXPECT_EQ(done.client, kNetworkAccount);
  EXPECT_EQ(done.owner, "carol");
  st.record_audit(*task, AuditOutcome::Passed, "greedy: fine", kVerifyT0 + 42);
  EXPECT_EQ(due_ids(st, kVerifyT0 + 50), (std::vector<std::string>{"job-1", *audit}));
  EXPECT_EQ(st.node_stats("n1").audits_passed, 1);
  EXPECT_TRUE(st.node_stats("n1").banned.empty());
}

// Probation's count (coordinator.h): passed audits of the node's own jobs, no other node's, no
// failed or unjudged one, counted up to the limit asked.
TEST_P(JobVerificationTest, PassedAuditsAreCountedPerNodeUpToTheProbationsLength) {
  auto st = JobStore::open(fresh("verify-probation"), options(0));
  st.register_node(node("n1", "alice"), kVerifyT0);
  st.register_node(node("n2", "bob"), kVerifyT0);
  EXPECT_EQ(st.audits_passed("n1", 10), 0);
  int64_t t = kVerifyT0 + 10;
  for (int i = 0; i < 3; ++i, t += 100) {
    const std::string job = "job-" + std::to_string(i);
    run_job(st, job, "n1", t);
    const auto audit = st.submit_audit(job, t + 10);
    ASSERT_TRUE(audit);
    const auto w = st.next_job_for("n2", t + 20);
    ASSERT_TRUE(w && w->job_id == *audit);
    st.append_output(*audit, w->attempt, "n2", 0, "{}", t + 21);
    st.complete(*audit, w->attempt, "n2", {0, 1, "stop"}, t + 22);
    const auto task = st.audit_task(*audit);
    ASSERT_TRUE(task);
    // The third audit is still being judged when counted.
    if (i < 2) st.record_audit(*task, AuditOutcome::Passed, "greedy: fine", t + 23);
  }
  EXPECT_EQ(st.audits_passed("n1", 10), 2);
  EXPECT_EQ(st.audits_passed("n1", 1), 1) << "counted no further than asked";
  EXPECT_EQ(st.audits_passed("n2", 10), 0) << "an auditor's own record is its jobs', not the ones it checked";
  EXPECT_EQ(st.node_stats("n1").audits_passed, 2);
}

// The memory check's record (memory_proofs.cpp): stored with the registration, so a node with a
// pending check never gets work; committing stores the probes; proving frees the node and is not
// asked again for the same claim; an answer to a replaced check changes nothing; a failed one,
// or registering again after committing instead of opening, bans the node.
TEST_P(JobVerificationTest, ANodeProvingItsMemoryGetsWorkOnlyOnceItProved) {
  auto st = JobStore::open(fresh("verify-memory"), options(0));
  const MemoryDemand d{1000, 32, kVerifyT0 + 20'000};
  st.submit(verify_request("job-1"), kVerifyT0);
  const auto c = st.register_node(node("n1", "alice"), kVerifyT0 + 1, {}, d);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->bytes(), 1000u * 1024);
  const auto pending = st.pending_memory_check("n1");
  ASSERT_TRUE(pending);
  EXPECT_EQ(pending->challenge.seed, c->seed);
  EXPECT_EQ(pending->challenge.due_ms, kVerifyT0 + 20'000);
  EXPECT_FALSE(pending->committed());
  EXPECT_TRUE(st.node_stats("n1").memory_check_pending);
  EXPECT_FALSE(st.next_job_for("n1", kVerifyT0 + 2)) << "placement passes over a node proving its memory";
  EXPECT_EQ(st.job("job-1").state, JobState::Queued);
  const auto replaced = st.register_node(node("n1", "alice"), kVerifyT0 + 3, {}, d);
  ASSERT_TRUE(replaced);
  EXPECT_NE(replaced->seed, c->seed);
  EXPECT_FALSE(st.commit_memory("n1", c->seed, std::string(32, 'r'), {5, 6}, kVerifyT0 + 10)) << "the first check was replaced";
  EXPECT_TRUE(st.commit_memory("n1", replaced->seed, std::string(32, 'r'), {5, 6}, kVerifyT0 + 10));
  EXPECT_FALSE(st.commit_memory("n1", replaced->seed, std::string(32, 's'), {7}, kVerifyT0 + 11)) << "committed once";
  const auto committed = st.pending_memory_check("n1");
  ASSERT_TRUE(committed && committed->committed());
  EXPECT_EQ(committed->root, std::string(32, 'r'));
  EXPECT_EQ(committed->probes, (std::vector<uint64_t>{5, 6}));
  EXPECT_EQ(committed->answer_by_ms, kVerifyT0 + 10);
  EXPECT_FALSE(st.record_memory_proof("n1", c->seed, "", kVerifyT0 + 4)) << "an answer to the replaced check";
  EXPECT_TRUE(st.record_memory_proof("n1", replaced->seed, "", kVerifyT0 + 5));
  EXPECT_FALSE(st.pending_memory_check("n1"));
  EXPECT_FALSE(st.node_stats("n1").memory_check_pending);
  EXPECT_EQ(st.node_stats("n1").memory_proven, 1000 * 1024);
  const auto w = st.next_job_for("n1", kVerifyT0 + 6);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->job_id, "job-1");
  EXPECT_FALSE(st.register_node(node("n1", "alice"), kVerifyT0 + 7, {}, d)) << "proved that much already";
  EXPECT_FALSE(st.pending_memory_check("n1"));
  const auto more = st.register_node(node("n1", "alice"), kVerifyT0 + 8, {}, MemoryDemand{2000, 32, kVerifyT0 + 20'008});
  ASSERT_TRUE(more) << "a larger claim is checked again";
  EXPECT_TRUE(st.record_memory_proof("n1", more->seed, "probe 3: block 7 is not what blocks 6 and 2 make", kVerifyT0 + 9));
  EXPECT_NE(st.node_stats("n1").banned.find("memory check: probe 3"), std::string::npos) << st.node_stats("n1").banned;

  // Committing, seeing the probes, and registering for a fresh seed instead of opening them.
  const auto c2 = st.register_node(node("n2", "bob"), kVerifyT0, {}, d);
  ASSERT_TRUE(c2);
  ASSERT_TRUE(st.commit_memory("n2", c2->seed, std::string(32, 'r'), {5}, kVerifyT0 + 10));
  EXPECT_THROW(st.register_node(node("n2", "bob"), kVerifyT0 + 1, {}, d), Banned);
  EXPECT_NE(st.node_stats("n2").banned.find("instead of opening the probes"), std::string::npos) << st.node_stats("n2").banned;
}

// Runs the audit job `audit` on `auditor` to its end and reads its task back.
AuditTask finish_audit(JobStore& st, const std::string& audit, const std::string& auditor, int64_t now) {
  const auto w = st.next_job_for(auditor, now);
  EXPECT_TRUE(w && w->job_id == audit) << auditor << " was not given " << audit;
  if (!w) return {};
  st.append_output(audit, w->attempt, auditor, 0, "{}", now + 1);
  st.complete(audit, w->attempt, auditor, {0, 1, "stop"}, now + 2);
  const auto task = st.audit_task(audit);
  EXPECT_TRUE(task);
  return task ? *task : AuditTask{};
}

// A failed audit is confirmed by a node of a third owner: when it fails too, the audited node
// is banned and forfeits everything it had pending; it gets no more work, cannot register
// again, and placement passes it over.
TEST_P(JobVerificationTest, TwoAuditorsAgreeingBanTheNodeAndForfeitItsPendingPayments) {
  auto st = JobStore::open(fresh("verify-ban"), options(60'000));
  st.register_node(node("n1", "mallory"), kVerifyT0);
  run_job(st, "job-1", "n1", kVerifyT0);
  run_job(st, "job-2", "n1", kVerifyT0 + 10);
  st.register_node(node("n4", "carol"), kVerifyT0 + 20);
  st.register_node(node("n5", "dave"), kVerifyT0 + 20);
  const auto audit = st.submit_audit("job-1", kVerifyT0 + 20);
  ASSERT_TRUE(audit);
  EXPECT_FALSE(st.submit_audit("job-1", kVerifyT0 + 21)) << "audited once";
  // n4 and n5 are both free: the lower id takes the first audit.
  const AuditTask first = finish_audit(st, *audit, "n4", kVerifyT0 + 30);
  EXPECT_EQ(first.round, 1);
  EXPECT_EQ(first.auditor_owner, "carol");
  const AuditDecision d1 = st.record_audit(first, AuditOutcome::Failed, "greedy: token 3 of 6 is 4.2 below the best logit", kVerifyT0 + 33);
  EXPECT_TRUE(d1.banned_node.empty()) << "one auditor is not enough";
  ASSERT_FALSE(d1.confirmation.empty());
  EXPECT_TRUE(st.node_stats("n1").banned.empty());
  EXPECT_FALSE(st.next_job_for("n4", kVerifyT0 + 40)) << "the first auditor cannot confirm itself";
  const AuditTask second = finish_audit(st, d1.confirmation, "n5", kVerifyT0 + 40);
  EXPECT_EQ(second.round, 2);
  EXPECT_EQ(second.first_audit, *audit);
  EXPECT_EQ(second.first_auditor_node, "n4");
  const auto waiting = due_ids(st, kVerifyT0 + 120'000);
  EXPECT_EQ(std::find(waiting.begin(), waiting.end(), "job-1"), waiting.end()) << "job-1 waits for the verdict";
  EXPECT_NE(std::find(waiting.begin(), waiting.end(), "job-2"), waiting.end()) << "job-2 is not audited";
  EXPECT_EQ(st.unjudged_audits(), std::vector<std::string>{d1.confirmation}) << "done, its verdict not recorded yet";
  // An audit of n1's other work is running on n4 when the ban comes: it decides nothing now.
  const auto audit2 = st.submit_audit("job-2", kVerifyT0 + 41);
  ASSERT_TRUE(audit2);
  const auto running = st.next_job_for("n4", kVerifyT0 + 42);
  ASSERT_TRUE(running && running->job_id == *audit2);
  const AuditDecision d2 = st.record_audit(second, AuditOutcome::Failed, "greedy: token 3 of 6 is 4.1 below the best logit", kVerifyT0 + 43);
  EXPECT_EQ(d2.banned_node, "n1");
  EXPECT_EQ(st.job(*audit2).state, JobState::Cancelled);
  EXPECT_FALSE(st.next_job_for("n4", kVerifyT0 + 44)) << "its cancelled audit is not handed out again";
  EXPECT_TRUE(st.unjudged_audits().empty());
  // Recording a verdict again (a retry after a failure half-way) changes nothing.
  const AuditDecision again = st.record_audit(first, AuditOutcome::Failed, "again", kVerifyT0 + 44);
  EXPECT_TRUE(again.banned_node.empty() && again.confirmation.empty());
  EXPECT_EQ(st.settlement("job-1"), SettlementState::Forfeited);
  EXPECT_EQ(st.settlement("job-2"), SettlementState::Forfeited);
  const NodeStats n = st.node_stats("n1");
  EXPECT_NE(n.banned.find("token 3 of 6 is 4.1"), std::string::npos) << n.banned;
  EXPECT_EQ(n.audits_failed, 1);
  EXPECT_EQ(n.reliability, 0);
  EXPECT_THROW(st.next_job_for("n1", kVerifyT0 + 50), Banned);
  EXPECT_THROW(st.register_node(node("n1", "mallory"), kVerifyT0 + 51), Banned);
  st.submit(verify_request("job-3"), kVerifyT0 + 60);
  const AssignResult r = st.assign("job-3", kVerifyT0 + 60);
  EXPECT_EQ(r.node_id, "n4") << "n4's cancelled audit freed its slot; " << r.reason;
  const NodeView banned = st.nodes().front();
  EXPECT_EQ(banned.info.id, "n1");
  EXPECT_FALSE(banned.banned.empty());
  EXPECT_TRUE(st.node_stats("n4").banned.empty());
  EXPECT_TRUE(st.node_stats("n5").banned.empty());
}

// The confirming auditor passes what the first failed: the first auditor is the one banned
// (it ran another file, or lied), and the audited node is paid.
TEST_P(JobVerificationTest, AFirstAuditorContradictedByTheSecondIsBannedInstead) {
  auto st = JobStore::open(fresh("verify-framed"), options(0));
  st.register_node(node("n1", "alice"), kVerifyT0);
  run_job(st, "job-1", "n1", kVerifyT0);
  st.register_node(node("n4", "mallory"), kVerifyT0 + 20);
  st.register_node(node("n5", "dave"), kVerifyT0 + 20);
  const auto audit = st.submit_audit("job-1", kVerifyT0 + 20);
  ASSERT_TRUE(audit);
  const AuditTask first = finish_audit(st, *audit, "n4", kVerifyT0 + 30);
  const AuditDecision d1 = st.record_audit(first, AuditOutcome::Failed, "greedy: token 0 of 6 is 9 below", kVerifyT0 + 33);
  ASSERT_FALSE(d1.confirmation.empty());
  const AuditTask second = finish_audit(st, d1.confirmation, "n5", kVerifyT0 + 40);
  const AuditDecision d2 = st.record_audit(second, AuditOutcome::Passed, "greedy: fine", kVerifyT0 + 43);
  EXPECT_EQ(d2.banned_node, "n4");
  EXPECT_NE(st.node_stats("n4").banned.find("contradicted"), std::string::npos) << st.node_stats("n4").banned;
  EXPECT_TRUE(st.node_stats("n1").banned.empty());
  EXPECT_EQ(st.node_stats("n1").audits_passed, 1);
  const auto due = due_ids(st, kVerifyT0 + 50);
  EXPECT_NE(std::find(due.begin(), due.end(), "job-1"), due.end());
  EXPECT_EQ(st.settlement(*audit), SettlementState::Forfeited) << "the false audit is not paid";
}

// With no third owner to confirm, a failed audit stands unconfirmed: nobody is penalised.
TEST_P(JobVerificationTest, AFailedAuditNobodyCanConfirmPenalisesNobody) {
  auto st = JobStore::open(fresh("verify-unconfirmed"), options(0));
  st.register_node(node("n1", "alice"), kVerifyT0);
  run_job(st, "job-1", "n1", kVerifyT0);
  st.register_node(node("n4", "carol"), kVerifyT0 + 20);
  const auto audit = st.submit_audit("job-1", kVerifyT0 + 20);
  ASSERT_TRUE(audit);
  const AuditTask first = finish_audit(st, *audit, "n4", kVerifyT0 + 30);
  const AuditDecision d = st.record_audit(first, AuditOutcome::Failed, "greedy: off", kVerifyT0 + 33);
  ASSERT_FALSE(d.confirmation.empty());
  // Nobody may take the confirmation: it failed at placement and the payment is released.
  EXPECT_EQ(st.job(d.confirmation).state, JobState::Failed);
  EXPECT_TRUE(st.node_stats("n1").banned.empty());
  EXPECT_TRUE(st.node_stats("n4").banned.empty());
  const auto due = due_ids(st, kVerifyT0 + 35);
  EXPECT_NE(std::find(due.begin(), due.end(), "job-1"), due.end());
}

TEST_P(JobVerificationTest, OnlyJobsOfOneAuthorWithTokenIdsAreAudited) {
  auto st = JobStore::open(fresh("verify-which"), options(0));
  st.register_node(node("n1", "alice"), kVerifyT0);
  st.register_node(node("n4", "carol"), kVerifyT0);
  // No token ids: nothing to score.
  run_job(st, "job-plain", "n1", kVerifyT0, false);
  EXPECT_FALSE(st.submit_audit("job-plain", kVerifyT0 + 10));
  // Resumed: two nodes wrote its output.
  st.submit(verify_request("job-resumed"), kVerifyT0 + 20);
  auto w = st.next_job_for("n1", kVerifyT0 + 20);
  ASSERT_TRUE(w);
  st.append_output("job-resumed", w->attempt, "n1", 0, "a", kVerifyT0 + 21, {1});
  st.hand_back("job-resumed", w->attempt, "n1", kVerifyT0 + 22);
  st.heartbeat("n1", HeartbeatState{0, NodeStatus::Draining, std::nullopt}, kVerifyT0 + 23);
  w = st.next_job_for("n4", kVerifyT0 + 24);
  ASSERT_TRUE(w);
  ASSERT_EQ(w->job_id, "job-resumed");
  st.append_output("job-resumed", w->attempt, "n4", 1, "b", kVerifyT0 + 25, {2});
  st.complete("job-resumed", w->attempt, "n4", {5, 2, "length"}, kVerifyT0 + 26);
  EXPECT_FALSE(st.submit_audit("job-resumed", kVerifyT0 + 30));
  // Not done, unknown, or itself an audit.
  EXPECT_FALSE(st.submit_audit("no-such-job", kVerifyT0 + 30));
  st.heartbeat("n1", HeartbeatState{}, kVerifyT0 + 31);
  run_job(st, "job-ok", "n1", kVerifyT0 + 40);
  const auto audit = st.submit_audit("job-ok", kVerifyT0 + 50);
  ASSERT_TRUE(audit);
  EXPECT_FALSE(st.submit_audit(*audit, kVerifyT0 + 51));
}

TEST_P(JobVerificationTest, AnAuditNoNodeCanTakeReleasesThePayment) {
  auto st = JobStore::open(fresh("verify-hopeless"), options(0));
  st.register_node(node("n1", "alice"), kVerifyT0);
  run_job(st, "job-1", "n1", kVerifyT0);
  const auto audit = st.submit_audit("job-1", kVerifyT0 + 10);
  ASSERT_TRUE(audit);
  const JobStatus a = st.job(*audit);
  EXPECT_EQ(a.state, JobState::Failed) << "placed at once, and no node may ever take it";
  EXPECT_NE(a.error.find("is a party to the work this job audits"), std::string::npos) << a.error;
  EXPECT_EQ(due_ids(st, kVerifyT0 + 13), std::vector<std::string>{"job-1"});
}


network::Canary canary(const std::string& sha = kShaA) {
  Canary c;
  c.model = kSmall.name;
  c.model_sha256 = sha;
  c.request = verify_request("unused").request;
  c.tokens = {0, 1, 10, 11, 20, 21};
  c.margins = {1, 1, 1, 1, 1, 1};
  return c;
}

// A canary goes to the node it was sent for alone, as an ordinary job (nothing in the work says
// canary), only to a node offering the canary's file; judged, it either bans the node or sets
// its measured share of the predicted speed, which placement then scores by.
TEST_P(JobVerificationTest, ACanaryGoesToItsNodeAloneAndMeasuresItOrBansIt) {
  auto st = JobStore::open(fresh("verify-canary"), options(0));
  EXPECT_FALSE(st.submit_canary("n1", 0, kVerifyT0)) << "no node, no canaries";
  st.register_node(node("n1", "alice"), kVerifyT0);
  st.register_node(node("n2", "bob"), kVerifyT0);
  st.register_node(node("n3", "carol", kShaB), kVerifyT0);
  EXPECT_FALSE(st.submit_canary("n1", 0, kVerifyT0)) << "no canaries stored";
  const std::string id = st.add_canary(canary(), kVerifyT0);
  EXPECT_EQ(id.rfind("canary-", 0), 0u);
  ASSERT_EQ(st.canaries().size(), 1u);
  EXPECT_EQ(st.canaries()[0].tokens, canary().tokens);
  EXPECT_FALSE(st.submit_canary("n3", 7, kVerifyT0)) << "n3 offers another file under the name";
  const auto job = st.submit_canary("n2", 7, kVerifyT0 + 1);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->rfind("job-", 0), 0u) << "named like any client's job";
  EXPECT_FALSE(st.next_job_for("n1", kVerifyT0 + 2)) << "n1 is idle and better placed, but the canary is n2's";
  const auto w = st.next_job_for("n2", kVerifyT0 + 1'000);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->job_id, *job);
  EXPECT_EQ(w->request, canary().request);
  EXPECT_EQ(w->max_tokens, 8) << "the body's max_tokens, as a client's job would get";
  for (int i = 0; i < 3; ++i) st.append_output(*job, w->attempt, "n2", i, "t", kVerifyT0 + 1'100, {10 * i, 10 * i + 1});
  st.complete(*job, w->attempt, "n2", {5, 6, "length"}, kVerifyT0 + 1'500);  // 6 tokens in 0.5 s
  const auto run = st.canary_run(*job);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->node_id, "n2");
  EXPECT_EQ(run->returned, canary().tokens);
  EXPECT_DOUBLE_EQ(run->measured_tps, 12.0);
  EXPECT_GT(run->predicted_tps, 12.0);
  EXPECT_FALSE(st.canary_run("job-none"));
  st.record_canary(*run, check_canary(run->canary.tokens, run->canary.margins, run->returned), kVerifyT0 + 1'600);
  std::map<std::string, NodeView> by_id;
  for (const NodeView& v : st.nodes()) by_id[v.info.id] = v;
  ASSERT_TRUE(by_id["n2"].speed_ratio);
  EXPECT_NEAR(*by_id["n2"].speed_ratio, 12.0 / run->predicted_tps, 1e-9);
  EXPECT_FALSE(by_id["n1"].speed_ratio);
  EXPECT_EQ(st.node_stats("n2").audits_passed, 1);
  EXPECT_EQ(st.audits_passed("n2", 10), 0) << "probation counts client jobs: every registration brings a canary";
  // n2 claims what n1 claims but delivered a fraction of it: n1 wins the next job.
  st.submit(verify_request("job-next"), kVerifyT0 + 2'000);
  EXPECT_EQ(st.assign("job-next", kVerifyT0 + 2'000).node_id, "n1");

  // A wrong answer bans at once: the operator's own reference needs no second opinion.
  const auto job2 = st.submit_canary("n1", 0, kVerifyT0 + 3'000);
  ASSERT_TRUE(job2);
  st.heartbeat("n1", HeartbeatState{}, kVerifyT0 + 3'000);
  auto w2 = st.next_job_for("n1", kVerifyT0 + 3'001);
  while (w2 && w2->job_id != *job2) {  // job-next first
    st.complete(w2->job_id, w2->attempt, "n1", {5, 0, "stop"}, kVerifyT0 + 3'002);
    w2 = st.next_job_for("n1", kVerifyT0 + 3'003);
  }
  ASSERT_TRUE(w2);
  st.append_output(*job2, w2->attempt, "n1", 0, "x", kVerifyT0 + 3'010, {99});
  st.complete(*job2, w2->attempt, "n1", {5, 1, "length"}, kVerifyT0 + 3'020);
  const auto run2 = st.canary_run(*job2);
  ASSERT_TRUE(run2);
  const Verdict v = check_canary(run2->canary.tokens, run2->canary.margins, run2->returned);
  EXPECT_EQ(v.outcome, AuditOutcome::Failed);
  st.record_canary(*run2, v, kVerifyT0 + 3'030);
  EXPECT_NE(st.node_stats("n1").banned.find("canary " + id), std::string::npos) << st.node_stats("n1").banned;
  EXPECT_EQ(st.settlement(*job2), SettlementState::Forfeited);
  EXPECT_TRUE(st.remove_canary(id));
  EXPECT_FALSE(st.remove_canary(id));
  EXPECT_THROW(st.add_canary(canary("not-a-hash"), kVerifyT0), Error);
}

// The price class is measured: a node is priced as a laptop until a canary measured it, then
// by the bandwidth it delivered (its measured share of what it reported) — never by its label.
TEST_P(JobVerificationTest, ANodesPriceClassIsTheBandwidthACanaryMeasuredNotItsLabel) {
  auto st = JobStore::open(fresh("verify-price"), options(0));
  NodeInfo n = node("n1", "alice");
  n.hardware = HardwareClass::Workstation;  // what it says
  st.register_node(n, kVerifyT0);
  st.add_canary(canary(), kVerifyT0);
  EXPECT_EQ(run_job(st, "job-before", "n1", kVerifyT0).usage.hardware, HardwareClass::Laptop) << "unmeasured";
  const auto job = st.submit_canary("n1", 0, kVerifyT0 + 10);
  ASSERT_TRUE(job);
  const auto w = st.next_job_for("n1", kVerifyT0 + 100);
  ASSERT_TRUE(w);
  for (int i = 0; i < 3; ++i) st.append_output(*job, w->attempt, "n1", i, "t", kVerifyT0 + 101, {10 * i, 10 * i + 1});
  st.complete(*job, w->attempt, "n1", {5, 6, "length"}, kVerifyT0 + 101);  // 6 tokens in 1 ms: faster than predicted
  const auto run = st.canary_run(*job);
  ASSERT_TRUE(run);
  st.record_canary(*run, check_canary(run->canary.tokens, run->canary.margins, run->returned), kVerifyT0 + 102);
  // It delivered all of the 200 GB/s it reported: desktop, not the workstation it claimed.
  EXPECT_EQ(run_job(st, "job-after", "n1", kVerifyT0 + 200).usage.hardware, HardwareClass::Desktop);
  // Registering again forgets the measurement until the next canary.
  st.register_node(n, kVerifyT0 + 300);
  EXPECT_EQ(run_job(st, "job-again", "n1", kVerifyT0 + 400).usage.hardware, HardwareClass::Laptop);
  EXPECT_EQ(measured_hardware_class(99.9), HardwareClass::Laptop);
  EXPECT_EQ(measured_hardware_class(100), HardwareClass::Desktop);
  EXPECT_EQ(measured_hardware_class(819), HardwareClass::Workstation);
}

// A store written by the previous version gains the new columns and tables when opened, and
// the jobs it had completed are due (the coordinator pays those the ledger lacks).
TEST_P(JobVerificationTest, AVersionTwoStoreIsUpgradedWithItsCompletedJobsDue) {
  const std::string where = fresh("verify-upgrade");
  {
    auto st = JobStore::open(where, options(0));
    st.register_node(node("n1", "alice"), kVerifyT0);
    run_job(st, "job-old", "n1", kVerifyT0);
  }
  {
    // Back to version 2's shape: it is brought to 3 (audits), to 4 (nodes.seq), to 5 (memory
    // checks), to 6 (the node change log), to 7 (attempts rebuilt without foreign keys), then to 8
    // (the queue index of queued jobs only).
    auto db = sql::open_database(where, {"job store", "orchard-jobs", "8", ""});
    db->write([&] {
      db->exec("DROP INDEX jobs_queued");
      db->exec("DROP INDEX jobs_audits");
      db->exec("CREATE INDEX jobs_queue ON jobs(state, queued_at)");
      db->exec("DROP TABLE node_changes");
      db->exec("DROP TABLE node_changes_pruned");
      db->exec("DROP INDEX nodes_seq");
      db->exec("ALTER TABLE nodes DROP COLUMN seq");
      db->exec("DROP TABLE settlements");
      db->exec("DROP TABLE canaries");
      for (const char* c : {"kind", "audit_of", "exclude_owners", "model_sha256", "only_node"})
        db->exec(std::string("ALTER TABLE jobs DROP COLUMN ") + c);
      for (const char* c : {"banned", "speed_ratio", "measured_gbs", "memory_challenge", "memory_proven"}) db->exec(std::string("ALTER TABLE nodes DROP COLUMN ") + c);
      for (const char* c : {"fetched_at", "predicted_tps"}) db->exec(std::string("ALTER TABLE attempts DROP COLUMN ") + c);
      db->exec("UPDATE meta SET value = '2' WHERE key = 'version'");
    });
  }
  EXPECT_THROW(sql::open_database(where, {"job store", "orchard-jobs", "8", ""}), Error) << "it is version 2 now";
  auto st = JobStore::open(where, options(0));
  {
    // Version 7 rebuilt the attempts: the old job's attempt came through whole.
    auto db = sql::open_database(where, {"job store", "orchard-jobs", "8", ""});
    sql::Stmt a(*db, "SELECT node_id, state, prompt_tokens FROM attempts WHERE job_id = 'job-old'");
    ASSERT_TRUE(a.step());
    EXPECT_EQ(a.text(0), "n1");
    EXPECT_EQ(a.text(1), "done");
    EXPECT_FALSE(a.step());
  }
  EXPECT_EQ(due_ids(st, kVerifyT0 + 10), std::vector<std::string>{"job-old"});
  EXPECT_EQ(st.job("job-old").state, JobState::Done);
  run_job(st, "job-new", "n1", kVerifyT0 + 20);
  EXPECT_EQ(st.settlement("job-new"), SettlementState::Pending);
  EXPECT_TRUE(st.register_node(node("n1", "alice"), kVerifyT0 + 30, {}, MemoryDemand{10, 32, kVerifyT0 + 40}))
      << "version 5's columns are there";
  // Version 6's log: the placement of job-new was logged for n1.
  auto db = sql::open_database(where, {"job store", "orchard-jobs", "8", ""});
  sql::Stmt changes(*db, "SELECT count(*) FROM node_changes WHERE node_id = 'n1'");
  changes.step();
  EXPECT_GE(changes.i64(0), 1);
}

}  // namespace
}  // namespace orchard::network
