#pragma once
// Inside the coordinator: what its three files share (coordinator.cpp: the server, the
// background threads and node authentication; coordinator_nodes.cpp: the node endpoints;
// coordinator_clients.cpp: the client and public endpoints).
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>

#include "model/json_number.h"
#include "network/key_rate_limit.h"
#include "network/model_pins.h"
#include "network/api_keys.h"
#include "network/coordinator.h"
#include "network/ledger.h"
#include "network/protocol_names.h"
#include "network/nonce_store.h"
#include "network/parked_polls.h"
#include "network/rate_meter.h"
#include "serve/event_server.h"
#include "serve/http_util.h"
#include "serve/stream.h"

namespace orchard::network {

// Wakes whoever waits for something to happen (a job to take, output to pass on) without
// polling the files in a tight loop. Waits are short either way: another coordinator sharing
// the files cannot signal this one.
class Signal {
 public:
  uint64_t generation() {
    std::lock_guard lock(mu_);
    return generation_;
  }
  // Waits for a notify() after the one `seen` counted (at once when one came since), then
  // counts it: a loop that works between its waits misses none.
  void wait_since(uint64_t& seen, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return generation_ != seen; });
    seen = generation_;
  }
  void notify() {
    {
      std::lock_guard lock(mu_);
      ++generation_;
    }
    cv_.notify_all();
  }
  void wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    const uint64_t seen = generation_;
    cv_.wait_for(lock, timeout, [&] { return generation_ != seen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
};

struct Coordinator::State {
  explicit State(CoordinatorOptions o);

  CoordinatorOptions opts;
  CoordinatorFiles files;
  // One connection each, so one transaction at a time: the mutexes keep requests' operations whole.
  std::mutex store_mu;
  JobStore store;
  std::mutex ledger_mu;
  Ledger ledger;
  NodeIdentity signer;  // the coordinator's own Ed25519 key (coordinator.key): signs ledger heads
  ApiKeys keys;  // single statements: safe on the shared connection
  KeyRateLimiter key_rate{opts.requests_per_minute_per_key};
  std::unique_ptr<DatabaseNonceStore> nonces;
  // Registered nodes' public keys, as the store has them. A node id is derived from its key, so
  // an id's key never changes: every signed request after the first is checked without a trip
  // to the store (a round trip, and the store's lock, on PostgreSQL).
  std::mutex node_keys_mu;
  std::unordered_map<std::string, std::string> node_keys;
  std::mutex pins_mu;
  ModelPins pins;  // names the operator pinned to a file's SHA-256 (model_pins.h)

  RateMeter tokens;  // generated tokens as their output arrives: the world page's tokens/s

  std::mutex audit_mu;
  std::mt19937_64 audit_draw{std::random_device{}()};  // which completed jobs are audited
  std::mutex settle_mu;  // one settling round at a time (the sweep's and completions')
  std::mutex judge_mu;   // one audit judged at a time

  Signal work;    // a job was queued or requeued, a node became free
  Signal output;  // output was stored, a job finished or failed
  std::atomic<bool> stopping{false};

  // Client streams fed from the store by the pump thread (coordinator_clients.cpp).
  struct Feed {
    std::shared_ptr<serve::Stream> stream;
    size_t delivered = 0;  // output chunks pushed so far
    bool cancel_on_hang_up = true;  // false for a request with an Idempotency-Key (it retries)
  };
  std::mutex feeds_mu;
  std::map<std::string, Feed> feeds;  // by job id

  std::unique_ptr<serve::EventServer> http;  // plain or TLS
  int port = -1;
  // Nodes' long-polls waiting for work (no thread each); the dispatcher answers them. A poll's
  // look for work and its parking happen under dispatch_mu, as does each dispatching round, so
  // work assigned in between is never missed. After `http`: a parked reply still holds its
  // connection, which must go before the server's event loop does.
  ParkedPolls polls;
  std::mutex dispatch_mu;
  std::thread sweeper, pump, dispatcher;

  template <class F>
  auto with_store(F f) {
    std::lock_guard lock(store_mu);
    return f(store);
  }
};

int64_t unix_ms();

struct Payment {
  int64_t credits = 0;               // micro-credits the job costs
  std::optional<int64_t> ledger_seq;  // the entry paying it; none when nothing is paid
};
// Pays a completed job in the ledger, once (pay() returns the first payment on a repeat).
// Nothing is paid for no tokens, or when the client is the node's owner.
Payment pay(Coordinator::State& s, const Completion& c);

// After a node completed a job (coordinator_verification.cpp): judges it when it was an audit,
// queues an audit of it at the configured rate, then pays what is due. Returns what the node
// is told: {"credits", "settlement": "pending" | "paid" | "forfeited", "ledger_seq"}.
nlohmann::json settle_completion(Coordinator::State& s, const Completion& c);
// Pays every job whose audit window closed with no audit running (the sweep, each round),
// after judging any audit job done whose verdict was not recorded.
void settle_due(Coordinator::State& s);
// Judges a done audit job's report and records the verdict (once: a repeat changes nothing).
void judge_audit_job(Coordinator::State& s, const std::string& audit_job);
// Queues a canary for the node when there is one for its models (at registration, and after
// client jobs at the canary rate); logs and carries on when it cannot.
void send_canary(Coordinator::State& s, const std::string& node_id);

// A field of a node's JSON body, as 400s naming what is wrong (absent, wrong type, out of range).
template <class T>
T body_field(const nlohmann::json& body, const char* key) {
  if (!body.contains(key)) throw serve::ApiError::bad_request(std::string("'") + key + "' is required", key);
  try {
    return exact_get<T>(body[key]);
  } catch (const nlohmann::json::out_of_range&) {
    throw serve::ApiError::bad_request(std::string("'") + key + "' is out of range", key);
  } catch (const nlohmann::json::exception&) {
    throw serve::ApiError::bad_request(std::string("'") + key + "' has the wrong type", key);
  }
}

using NodeHandler = std::function<void(const AuthResult& node, const httplib::Request&, httplib::Response&)>;
// A signed node endpoint: refuses unauthenticated requests (401; 503 when the check itself
// failed) and turns the store's refusals into statuses (403 not your job, 409 conflict).
serve::Handler node_endpoint(Coordinator::State& s, bool registering, NodeHandler h);

void add_node_routes(Coordinator::State& s);
// The memory check (coordinator_memory.cpp): what a registering node is asked to fill, sized to
// its claim (nullopt when checks are off), and the endpoints where it commits and opens.
std::optional<MemoryDemand> memory_demand(Coordinator::State& s, const NodeInfo& info);
void add_memory_check_routes(Coordinator::State& s);
void add_client_routes(Coordinator::State& s);
// The world page (/ and /world) and its data, GET /v1/world (coordinator_world.cpp).
void add_world_routes(Coordinator::State& s);
// The public ledger endpoints: the signing key, the signed head, an account's entries, the chain.
void add_ledger_routes(Coordinator::State& s);
// Signs the ledger head with the coordinator's key unless it already signed this head; errors
// are logged (the next round tries again).
void sign_head_if_moved(Coordinator::State& s);
// Pushes stored output to the clients' streams until the coordinator stops.
void run_pump(Coordinator::State& s);
// Answers parked long-polls until the coordinator stops: a node's when work is assigned to it
// (placing queued jobs first), 204 at a poll's deadline (coordinator_polls.cpp).
void run_dispatcher(Coordinator::State& s);
// POST /v1/node/work, the long-poll (coordinator_polls.cpp).
void add_poll_route(Coordinator::State& s);

}  // namespace orchard::network
