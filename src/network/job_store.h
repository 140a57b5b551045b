#pragma once
// The coordinator's durable state: nodes, jobs, attempts and streamed output, in an SQLite file
// or a PostgreSQL database (database.h). Every operation is one transaction that behaves as if
// it ran alone, and takes the time as `now_ms`, so tests drive the clock and a restarted
// coordinator continues from the database.
//
// A job's life:
//   queued ──assign (placement.h picks the node)──► assigned ──node fetches / streams──► running
//     ▲                                                                                  │
//     ├── hand_back (owner drains the node; no penalty) ◄────────────────────────────────┤
//     ├── expire: lease passed or node silent (abandoned; the node's reliability drops) ◄┤
//     │                                                                                  ▼
//   failed ◄── hopeless (no node could ever take it), waited too long, abandoned       done
//              max_attempts times, or its node cannot run it (fail)             (complete, once)
//   cancelled ◄── cancel: the client hung up before the end (from any state but done/failed);
//                 the live attempt ends with it, so the node's next report is refused
// Each assignment is an attempt (job, attempt number) held by one node under a lease: the
// node's heartbeats and appends renew it. Only the attempt's node may stream into it or complete
// it (NotYourJob otherwise). Streamed tokens belong to the job, not the attempt: a requeued job
// keeps them, and the next attempt resumes from the prompt plus those tokens.
//
// At most one attempt per job is live: the claim reads and writes in one transaction, and a
// partial UNIQUE index on live attempts makes the database itself refuse a second one.
// One JobStore per thread (a connection runs one transaction at a time); any number of
// connections and processes (coordinator replicas) may share the database.
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "network/protocol_names.h"
#include "network/placement.h"
#include "network/database.h"
#include "network/node_index.h"
#include "protocol/memory_proof.h"
#include "tensor/error.h"

namespace orchard::network {

struct StoreOptions {
  int64_t lease_ms = 30'000;              // an attempt's lease; heartbeats and appends renew it
  int64_t heartbeat_timeout_ms = 30'000;  // a node silent longer is gone: its attempts are abandoned
  int max_attempts = 3;                   // abandoned attempts after which a job fails
  int64_t queue_timeout_ms = 600'000;     // queued this long without a taker: the job fails
  double abandon_factor = 0.7;            // reliability × this per abandoned attempt
  double recover_share = 0.05;            // a completed job moves reliability this share toward 1
  int assign_batch = 64;                  // queued jobs one poll places at most (oldest first)
  // false: placements and completions commit without waiting for the disk (database.h,
  // set_wait_for_disk) — thousands of placements a second on a disk whose flush takes
  // milliseconds. The ledger always waits.
  bool wait_for_disk = true;
  // A completed job is paid once this much time has passed and no audit of it is running
  // (docs/verification.md); 0: as soon as no audit is running.
  int64_t audit_window_ms = 0;
  // How long the log of nodes whose live attempts changed keeps a change (job_store.cpp,
  // version 6): a coordinator whose placement index looked last before that reads every node
  // again. Its size is about two rows per placement over this window.
  int64_t change_window_ms = 120'000;
};

// A job id as the store makes them: "job-" and 16 random hex digits.
std::string new_job_id();

// What a job is: a client's, or an audit of another job's output (protocol/audit.h).
inline constexpr const char* kClientJob = "client";
inline constexpr const char* kAuditJob = "audit";
inline constexpr const char* kCanaryJob = "canary";
// The account audit jobs are billed to: the network pays its auditors.
inline constexpr const char* kNetworkAccount = "network";

enum class JobState { Queued, Assigned, Running, Done, Failed, Cancelled };
enum class AttemptState { Assigned, Running, Done, HandedBack, Abandoned, Failed, Cancelled };
const char* to_string(JobState s);
const char* to_string(AttemptState s);

// A node asked for, or reported on, an attempt that is not its own, or whose lease is over.
class NotYourJob : public Error {
 public:
  using Error::Error;
};

// A node an audit caught asked for work, registered or reported: it gets nothing more.
class Banned : public Error {
 public:
  using Error::Error;
};

struct JobRequest {
  std::string id;              // empty: the store makes one ("job-" and 16 hex digits)
  std::string client;          // the account that pays
  std::string model;
  nlohmann::json request;      // the chat/completions body as the client sent it
  int64_t n_ctx = 4096;        // context to reserve: prompt + max_tokens
  int64_t prompt_tokens = 0;   // estimated; 0: n_ctx − max_tokens
  int64_t max_tokens = 128;
};

struct AssignResult {
  std::string job_id;
  JobState state = JobState::Queued;  // Assigned, Queued (no node free now) or Failed (hopeless)
  std::string node_id;                // when assigned
  int64_t attempt = 0;                // when assigned
  std::string reason;                 // placement's reason, or why it waits or failed
};

struct Usage {
  int64_t prompt_tokens = 0, generated_tokens = 0;
  std::string finish_reason;  // as the node reported it ("stop", "length"); may be empty
};

// What paying for a completed job needs (credits.h, ledger.h).
struct Completion {
  bool first = false;  // false: this attempt had completed the job already; nothing changed
  std::string job_id;
  int64_t attempt = 0;
  std::string client, node_id, owner;
  std::string kind = kClientJob;
  JobUsage usage;      // tokens, and the size / hardware / dedicated classes fixed at assignment
};

struct JobStatus {
  std::string id, client, model;
  JobState state = JobState::Queued;
  std::string error;    // why it failed
  std::string waiting;  // while queued: why no node took it at the last try
  int64_t created_ms = 0, attempts = 0;
  std::string node_id;  // the node of the latest attempt
  std::vector<std::string> output;
  std::optional<Usage> usage;  // once done
};

// What a coordinator's memory check asks of a registering node (network/coordinator_memory.cpp).
struct MemoryDemand {
  uint64_t blocks = 0;
  int probes = 32;
  int64_t due_ms = 0;  // when the root must have come
};

// A node's memory check while pending: the challenge, and once the node committed, its root
// (raw bytes), the probes drawn for it and when they must be opened.
struct PendingMemoryCheck {
  protocol::MemoryChallenge challenge;
  std::string root;
  std::vector<uint64_t> probes;
  int64_t answer_by_ms = 0;
  bool committed() const { return !root.empty(); }
};

struct NodeStats {
  std::string node_id, owner;
  int64_t jobs_served = 0, tokens_generated = 0, tokens_streamed = 0, abandoned = 0, handed_back = 0;
  int64_t active_jobs = 0, last_heartbeat_ms = 0;
  double reliability = 1;
  bool draining = false;
  std::string banned;            // why an audit caught it; empty: in good standing
  int64_t audits_passed = 0, audits_failed = 0;
  int64_t pending_jobs = 0;      // completed, not paid yet (audit window open or audit running)
  int64_t memory_proven = 0;     // bytes its last passed memory check proved (0: none)
  bool memory_check_pending = false;  // a memory check it has not passed yet holds it from work
};

// An audit job and what it checks. A failed first audit is confirmed by a second auditor of
// a third owner before anyone is penalised (record_audit).
struct AuditTask {
  std::string audit_job, audited_job;
  std::string node_id, owner;                  // the audited job's node
  std::string auditor_node, auditor_owner;     // who ran this audit (empty until it is done)
  size_t tokens = 0;                           // how many returned tokens it scores
  int round = 1;                               // 2: the confirmation of a failed first audit
  std::string first_audit, first_auditor_node, first_why;  // round 2: the audit it confirms
};

// A greedy request with a known answer (protocol::check_canary), made by the operator with the
// pinned file (`orchard network canary add`).
struct Canary {
  std::string id;  // empty: add_canary makes one ("canary-" and 8 hex digits)
  std::string model, model_sha256;
  nlohmann::json request;  // {"api": "completions" | "chat", "body": {…}}
  std::vector<int32_t> tokens;
  std::vector<double> margins;
};

// A completed canary job, ready to judge: what the node returned and how fast.
struct CanaryRun {
  std::string job_id, node_id, owner;
  Canary canary;
  std::vector<int32_t> returned;
  double measured_tps = 0;   // generated tokens / (completed − fetched); 0 when unknown
  double predicted_tps = 0;  // what placement predicted for this node and model
};

// What record_audit decided.
struct AuditDecision {
  std::string banned_node;   // the node banned now, if any: the audited one, or a first auditor proven wrong
  std::string confirmation;  // the second audit queued to confirm a failed first one
};

// A completed job's payment: pending until the audit window closes and no audit runs, then
// paid, or forfeited when an audit caught its node.
enum class SettlementState { Pending, Paid, Forfeited };
const char* to_string(SettlementState s);

struct ExpireReport {
  std::vector<std::pair<std::string, int64_t>> abandoned;  // (job, attempt)
  std::vector<std::string> requeued, failed;
};

class JobStore {
 public:
  // Opens (creating when absent or empty) the store at `location`: an SQLite file's path or a
  // PostgreSQL URL (database.h). Throws orchard::Error naming it when it cannot be opened or
  // holds something other than a job store.
  static JobStore open(const std::string& location, const StoreOptions& options = {});

  JobStore(JobStore&&) noexcept = default;
  JobStore& operator=(JobStore&&) noexcept = default;

  // Nodes. Registering again replaces the description and keeps the reliability earned. A
  // registration under another owner while the node is alive (heartbeat within the timeout) is
  // refused (orchard::Error naming both owners): two agents sharing one key.
  // `public_key_hex` is the key the node signs its requests with (request_signing.h); empty
  // keeps the one recorded before.
  // With `memory`, the node's memory check (protocol/memory_proof.h) is stored in the same
  // write, so placement never sees the node before it: a fresh challenge is returned (replacing
  // one pending), or nullopt when the node proved that much already. A node that committed to
  // a check and registers again without opening it is banned (Banned is thrown): it would
  // otherwise try fresh seeds until the probes missed what it skipped.
  std::optional<protocol::MemoryChallenge> register_node(const NodeInfo& info, int64_t now_ms,
                                                         const std::string& public_key_hex = {},
                                                         const std::optional<MemoryDemand>& memory = std::nullopt);
  // The recorded public key of a node; nullopt for an unknown node or one registered without.
  std::optional<std::string> node_key(const std::string& node_id);
  // Records load and status (draining stops new assignments) and renews the node's leases:
  // every attempt not yet fetched, and the running ones `state.running` lists (all when absent).
  // Throws orchard::Error for an unknown node.
  void heartbeat(const std::string& node_id, const HeartbeatState& state, int64_t now_ms);

  // Jobs. Submitting an id again with the same client, model and request returns it unchanged
  // (a client's retry); with different ones it is an error. `created`, if given, says whether
  // this call stored the job.
  std::string submit(const JobRequest& job, int64_t now_ms, bool* created = nullptr);
  // Places one queued job: records an attempt on the chosen node, leaves it queued with the
  // reason when no node is free now, fails it when no node could ever take it.
  AssignResult assign(const std::string& job_id, int64_t now_ms);
  // assign() for the oldest queued jobs (at most options.assign_batch).
  std::vector<AssignResult> assign_queued(int64_t now_ms);
  // The long-poll: places queued jobs, then hands this node its oldest attempt not yet fetched
  // (now running, lease renewed). Polling is a sign of life, like a heartbeat.
  // Banned for a node an audit caught.
  std::optional<Work> next_job_for(const std::string& node_id, int64_t now_ms);
  // The nodes with an attempt assigned and not yet fetched (whose parked long-polls can be
  // answered now), and whether any job waits for a node.
  std::vector<std::string> nodes_with_assigned_work();
  bool has_queued();

  // Stores chunk `index` of the job's output: its text and the ids of the tokens it holds (what
  // a resuming node feeds after the prompt). Only the node holding `attempt` under a live lease
  // may (NotYourJob otherwise). Idempotent by index: the same chunk again returns false; another
  // at a stored index, or a gap, is an error. Renews the lease.
  bool append_output(const std::string& job_id, int64_t attempt, const std::string& node_id, int64_t index,
                     const std::string& text, int64_t now_ms, const std::vector<int32_t>& tokens = {});
  // Finishes the job, exactly once: the same attempt completing again returns the first
  // completion with first = false. NotYourJob for another node's or a dead attempt. What is
  // recorded and paid is not `usage` as reported: the generated tokens are those the job's
  // attempts streamed through append_output, and the prompt tokens are capped by what the request's
  // text could make (billed_usage.h); only the finish reason is taken as given.
  Completion complete(const std::string& job_id, int64_t attempt, const std::string& node_id, const Usage& usage,
                      int64_t now_ms);
  // Every completed job (first = false), oldest first: what a restarted coordinator checks
  // against the ledger, to pay what it completed but did not get to pay before it stopped.
  std::vector<Completion> completions();
  // The node cannot run the job at all (the prompt does not fit its context, the request makes
  // no sense to its model): the job fails with `error`, nobody pays. NotYourJob as complete().
  void fail(const std::string& job_id, int64_t attempt, const std::string& node_id, const std::string& error,
            int64_t now_ms);
  // The node gives the job back (its owner is reclaiming the machine): requeued with its output,
  // no penalty, and it does not count against max_attempts. Again for the same attempt: no-op.
  void hand_back(const std::string& job_id, int64_t attempt, const std::string& node_id, int64_t now_ms);
  // The client went away: a job not yet done or failed is cancelled, with its live attempt
  // (NotYourJob for the node's next append or complete), and nobody pays. False when the job
  // had already ended.
  bool cancel(const std::string& job_id, int64_t now_ms);
  // Abandons every live attempt whose lease passed or whose node went silent (its reliability
  // drops), requeues those jobs with their output or fails them after max_attempts, and fails
  // jobs queued longer than queue_timeout_ms.
  ExpireReport expire(int64_t now_ms);

  // Verification (docs/verification.md; job_verification.cpp).
  // Queues an audit of a completed client job: an audit job carrying its request and returned
  // tokens, for a node of another owner holding the same file. nullopt, and nothing queued,
  // when the job cannot be audited: not a completed client job, no tokens, or output from
  // several attempts (a resumed job has more than one author).
  std::optional<std::string> submit_audit(const std::string& job_id, int64_t now_ms);
  // The audit an audit job is; nullopt for another kind of job.
  std::optional<AuditTask> audit_task(const std::string& audit_job_id);
  // Audit jobs done whose verdict is not recorded (the coordinator stopped, or failed, between
  // the two): the sweep judges them.
  std::vector<std::string> unjudged_audits();
  // Records an audit's verdict on the audited job. A first audit that failed queues a second
  // one for a node of a third owner (neither the audited node's nor the first auditor's); when
  // no such audit can be queued the verdict stands unconfirmed and nobody is penalised. The
  // second decides: failed, the audited node is banned; passed, the first auditor is (it
  // reported what another copy of the same file contradicts). A banned node's pending payments
  // are all forfeited.
  AuditDecision record_audit(const AuditTask& task, AuditOutcome outcome, const std::string& why, int64_t now_ms);
  // Canaries (job_canaries.cpp). add_canary returns the id; remove_canary false for an unknown one.
  std::string add_canary(const Canary& c, int64_t now_ms);
  std::vector<Canary> canaries();
  bool remove_canary(const std::string& id);
  // Queues a canary job — to the node it is just a client's job — for `node_id` alone, drawn
  // (by `pick`, any number) among the canaries of models the node offers with the canary's
  // SHA-256. nullopt when there is none.
  std::optional<std::string> submit_canary(const std::string& node_id, uint64_t pick, int64_t now_ms);
  // A completed canary job; nullopt for another kind of job.
  std::optional<CanaryRun> canary_run(const std::string& job_id);
  // Records what a canary found: Failed bans the node (its pending payments forfeited);
  // otherwise the node's measured share of the predicted speed (measured ÷ predicted) becomes
  // its speed ratio, which placement trusts over what the node reports, and that share of its
  // reported bandwidth its measured bandwidth, which sets the price class of its next jobs
  // (measured_hardware_class; unmeasured nodes are priced as laptops). Registering again
  // clears both: the next canary measures the machines described then.
  void record_canary(const CanaryRun& run, const Verdict& v, int64_t now_ms);

  // Memory checks (memory_proofs.cpp, protocol/memory_proof.h); register_node stores the
  // challenge. The node's pending check, committed or not; nullopt when none is pending.
  std::optional<PendingMemoryCheck> pending_memory_check(const std::string& node_id);
  // The node committed to its fill: stores its root and the probes drawn for it, to be opened by
  // `answer_by_ms`. False, and nothing stored, when the pending check is not `seed`'s or is
  // committed already.
  bool commit_memory(const std::string& node_id, const std::string& seed, const std::string& root,
                     const std::vector<uint64_t>& probes, int64_t answer_by_ms);
  // The opened probes were checked: `why` empty, the node proved the challenge's bytes and may
  // get work; else it is banned for `why` (its pending payments forfeited). False, and nothing
  // recorded, when the pending check is no longer `seed`'s.
  bool record_memory_proof(const std::string& node_id, const std::string& seed, const std::string& why, int64_t now_ms);

  // Completed jobs whose payment is due: window closed, no audit running (or its audit job
  // ended without a verdict), node not banned. Oldest first.
  std::vector<Completion> due_settlements(int64_t now_ms);
  // The payment of a due job was made (or needs none): its settlement is paid.
  void mark_paid(const std::string& job_id, int64_t now_ms);
  // The job's settlement; nullopt when it has none (not completed).
  std::optional<SettlementState> settlement(const std::string& job_id);

  // Reads. job() throws orchard::Error for an unknown id; node_stats() for an unknown node.
  JobStatus job(const std::string& job_id);
  NodeStats node_stats(const std::string& node_id);
  // How many of the node's client jobs passed their audit (canaries not counted), up to `up_to`
  // (the probation's length: a veteran's whole history is not re-read at every completion).
  int64_t audits_passed(const std::string& node_id, int64_t up_to);
  // Every registered node as placement sees it.
  std::vector<NodeView> nodes();
  // Reads every node into the placement index now (else the first placement does): a
  // coordinator starting on a network's store, a benchmark before it times placements.
  void warm_index();
  // Node rows the placement index has read since the store was opened (warm_index, the changes
  // each placement reads first): what a coordinator pays to follow the database.
  int64_t index_rows_read() const { return index_->rows_read; }
  // How many jobs are in each state (states with none are absent), for the world page.
  std::map<JobState, int64_t> job_counts();

  // The file's path or the URL (without a password), for messages.
  const std::string& where() const { return db_->name(); }
  const StoreOptions& options() const { return options_; }

 private:
  JobStore(std::unique_ptr<sql::Connection> db, const StoreOptions& o);
  struct Attempt;
  // Inside an open transaction.
  // Placing jobs (job_assignment.cpp): one job, or the oldest queued ones (assign_batch).
  AssignResult assign_in(const std::string& job_id, int64_t now_ms);
  std::vector<AssignResult> assign_queued_in(int64_t now_ms);
  struct Queued {
    std::string id;
    JobDemand demand;
    int64_t attempt = 0;  // the number its next attempt gets
  };
  static Queued queued_from(sql::Stmt& row, int at);  // kQueuedColumns, from column `at` on
  // Places `jobs` in order and writes the outcome in a fixed number of statements.
  std::vector<AssignResult> place_in(const std::vector<Queued>& jobs, NodeIndex& index, int64_t now_ms);
  struct NewAttempt {
    std::string job_id, node_id, plan, size_class, hardware;
    int64_t attempt = 0, dedicated = 0;
    double predicted_tps = 0;
  };
  NewAttempt new_attempt(const Queued& job, const Choice& c);
  // A job no node can start now: failed when none ever could, else its `waiting` reason.
  void not_placed_in(const Queued& job, const PlacementResult& placed, int64_t now_ms, AssignResult& r);
  void heartbeat_in(const std::string& node_id, const HeartbeatState& state, int64_t now_ms);
  JobStatus job_in(const std::string& job_id);
  std::optional<Work> next_job_in(const std::string& node_id, int64_t now_ms);
  // The poll's sign of life (throws for an unknown or banned node); with `look`, in the same
  // statement, whether it may find work: an attempt assigned to the node, or any queued job.
  bool poll_alive(const std::string& node_id, int64_t now_ms, bool look);
  Banned banned(const std::string& node_id, const std::string& why) const;
  // The attempt, when it is `node_id`'s (NotYourJob otherwise); `doing` is for the message.
  Attempt attempt_of(const std::string& job_id, int64_t attempt, const std::string& node_id, const char* doing);
  Completion completion_of(const std::string& job_id, int64_t attempt, const Attempt& a);
  // What a completion is billed for: the tokens the job streamed here, the prompt the node
  // reported capped by what the request could make (billed_usage.h).
  Usage billed_usage(const std::string& job_id, const Usage& reported);
  std::vector<std::string> output_of(const std::string& job_id, std::vector<std::vector<int32_t>>* tokens = nullptr);
  void fail_job(const std::string& job_id, const std::string& error, int64_t now_ms);
  // Throws Banned for a node an audit caught.
  void check_not_banned(const std::string& node_id);
  // Inside a write: queues an audit job of the done job `job_id` that none of `excluded`'s
  // nodes may take; nullopt when the job cannot be audited (submit_audit says when).
  std::optional<std::string> queue_audit_in(const std::string& job_id, const std::vector<std::string>& excluded,
                                            int64_t now_ms);
  // False when the node was banned already.
  bool ban_in(const std::string& node_id, const std::string& reason, int64_t now_ms);
  // Inside a write (memory_proofs.cpp): a fresh challenge for the node, or none when it proved
  // that much already; and the pending check as stored.
  std::optional<protocol::MemoryChallenge> challenge_memory_in(const std::string& node_id, const MemoryDemand& d, int64_t now_ms);
  std::optional<PendingMemoryCheck> pending_memory_check_in(const std::string& node_id);
  // The completion of the job's done attempt (the job must be done).
  Completion done_completion(const std::string& job_id);

  // Placement's view of the nodes (node_index.h), brought up to date with the rows changed
  // since it last looked; inside a transaction.
  NodeIndex& index_in();
  // Inside a write, after changing what placement sees of a node through its live attempts
  // (touch before they end) or an audit of its work entering or leaving confirmation: logged in
  // node_changes (a write to the node's own row sets its seq instead, kNextSeq).
  void touch_node_in(const std::string& node_id);
  void touch_job_nodes_in(const std::string& job_id);  // the nodes holding the job's live attempts
  // Logs the nodes as changed, in one statement sent with the next round trip. `counted`: this
  // store's index has counted the change already (NodeIndex::add_job), so when the number it
  // was logged under comes back, an index that had read the log up to just below it moves past
  // it instead of reading these nodes back (index_in).
  void nodes_changed_in(const std::vector<std::string>& node_ids, bool counted = false);
  void prune_changes_in();
  static constexpr const char* kNextChange =
      "coalesce((SELECT max(seq) FROM node_changes), (SELECT below FROM node_changes_pruned), 0) + 1";
  // The statement logging the nodes of the live attempts that `attempts_where` (a condition on
  // `attempts`) picks.
  static std::string log_live_nodes_sql(const std::string& attempts_where);
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> change_marks_;  // (when, log's top)
  static constexpr const char* kNextSeqValue = "(SELECT coalesce(max(seq), 0) + 1 FROM nodes)";
  static constexpr const char* kNextSeq = "seq = (SELECT coalesce(max(seq), 0) + 1 FROM nodes)";
  // A row of `SELECT <kViewColumns>`; `parse_info` false leaves the description unread but its id.
  NodeView read_view(sql::Stmt& s, bool parse_info = true);

  sql::Connection& db() const { return *db_; }
  std::unique_ptr<sql::Connection> db_;
  StoreOptions options_;
  struct IndexState {
    NodeIndex nodes;
    int64_t seq = -1;         // the highest nodes.seq it has read (−1: none yet)
    int64_t change_seq = -1;  // the highest node_changes.seq it has read
    std::unique_ptr<sql::Stmt> counted;  // the log of changes it counted itself (nodes_changed_in)
    int64_t rows_read = 0;
  };
  // Shared with the connection's rollback hook, which empties it: it may have read rows the
  // rolled-back transaction wrote (their seq numbers are handed out again).
  std::shared_ptr<IndexState> index_ = std::make_shared<IndexState>();
};

}  // namespace orchard::network
