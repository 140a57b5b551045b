#pragma once
// The network's coordinator (`orchard network serve`): an HTTP server over the job store, the
// ledger, the client API keys and the replay guard: SQLite files in one data folder, or one
// PostgreSQL database that several coordinator replicas share (database.h).
//
//   clients ──Bearer key──► /v1/chat/completions, /v1/completions, /v1/models
//                              │ submit + place (placement.h)          ▲ chunks as stored
//                              ▼                                       │
//                          job store (jobs, attempts under leases, output by chunk index)
//                              ▲ long-poll, output, complete, hand back│
//   node agents ──signed──► /v1/node/…  (outbound only: they work behind NAT)
//
// A job's output is stored under chunk indexes, so when a node vanishes mid-job and the sweep
// (every second: expire()) requeues it, the next node continues after the last stored chunk
// and the client's stream goes on without a seam. Completing a job pays it in the ledger,
// exactly once. docs/network-protocol.md describes every endpoint.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "network/job_store.h"
#include "network/protocol_names.h"
#include "serve/tls_server.h"

namespace orchard::network {

struct CoordinatorOptions {
  std::filesystem::path data_dir;    // created when absent
  std::string database;              // a postgresql:// URL; empty: SQLite files in data_dir
  // The key that signs ledger heads; empty: data_dir/coordinator.key. Required with `database`
  // and no data_dir; replicas share one (owners pin it), a copy of the same file each. Never in
  // the database: whoever can write there could then rewrite the ledger and sign it again.
  std::filesystem::path signing_key;
  std::string host = "127.0.0.1";
  int port = 8090;                   // 0: any free port (see Coordinator::bind)
  int http_threads = 16;             // threads running request handlers (connections hold none: serve/event_server.h)
  size_t max_body_bytes = 8u << 20;
  StoreOptions store;                // lease, heartbeat timeout, queue timeout, attempts
  int64_t sweep_interval_ms = 1000;  // how often leases and heartbeats are checked
  int64_t sign_every_ms = 60'000;    // how often the ledger head is signed (when it moved), and at shutdown
  int32_t default_max_tokens = 256;  // when a client does not say
  int64_t max_skew_ms = kDefaultMaxSkewMs;
  bool log = false;                  // one line per request on stderr
  serve::TlsFiles tls;               // both set: HTTPS; nodes then pin the certificate (--ca-cert)
  int requests_per_minute_per_key = 600;  // client requests per API key (bursts up to it); 0: unlimited
  bool require_credit = false;       // clients need a positive ledger balance to submit (402 otherwise)
  // Verification (docs/verification.md): the share of completed client jobs re-checked by
  // another owner's node holding the same file, and how audits are judged. How long payments
  // wait for them is store.audit_window_ms.
  double audit_rate = 0;
  // A new node's first jobs are audited at probation_audit_rate (when above audit_rate) until
  // probation_jobs of its client jobs passed an audit: a banned owner back under a new key pays
  // for the fresh start in audits. Audits off (audit_rate 0) means off, probation included.
  int probation_jobs = 0;
  double probation_audit_rate = 0;
  AuditRules audit_rules;
  // The share of completed client jobs after which the node gets a canary (a greedy request
  // with a known answer, `orchard network canary add`); every node also gets one when it
  // registers. No canaries stored: none sent.
  double canary_rate = 0;
  // The memory check (protocol/memory_proof.h): a node registering fills this share of its
  // largest machine's claimed memory and commits to it within memory_proof_slack_ms plus the
  // time a fill at memory_proof_min_gbs takes, then opens the probes drawn for it within
  // memory_proof_answer_ms; until then it gets no work. 0: no check.
  double memory_proof_share = 0;
  double memory_proof_min_gbs = 0.1;
  int64_t memory_proof_slack_ms = 10'000;
  int64_t memory_proof_answer_ms = 10'000;
  int memory_proof_probes = 32;
};

// The share of a node's completed client jobs audited, given how many of them passed an audit:
// probation_audit_rate while that is under probation_jobs, else audit_rate.
double audit_rate_for(const CoordinatorOptions& o, int64_t audits_passed);

// Where a coordinator's stores are: the SQLite files in its data folder, or, given a
// PostgreSQL URL, that database for all four (each store in its own schema).
struct CoordinatorFiles {
  std::string jobs, ledger, nonces, api_keys, model_pins;
  // coordinator.key: its Ed25519 key that signs ledger heads, PEM, made on first start. In the
  // data folder; with a database and no folder, none (CoordinatorOptions::signing_key then).
  std::filesystem::path signing_key;
};
CoordinatorFiles coordinator_files(const std::filesystem::path& data_dir, const std::string& database = {});

class Coordinator {
 public:
  // Opens (creating) the data folder and its files; throws orchard::Error naming a file that
  // cannot be opened or is not of its kind.
  explicit Coordinator(CoordinatorOptions options);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Binds the socket (throws naming host and port when it cannot); returns the port.
  int bind();
  // Serves until stop(), from another thread or a signal handler's.
  void run();
  void stop();

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace orchard::network
