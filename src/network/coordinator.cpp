// The coordinator's server: opening the data folder, the HTTP server's settings, node
// authentication, and the background threads (the lease sweep and the stream pump).
#include "network/coordinator.h"

#include <cstdio>

#include "network/coordinator_state.h"
#include "network/protocol_names.h"
#include "network/database.h"
#include "serve/http_util.h"

namespace orchard::network {

using nlohmann::json;
using serve::ApiError;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

CoordinatorFiles coordinator_files(const std::filesystem::path& dir, const std::string& database) {
  const std::filesystem::path key = dir.empty() ? std::filesystem::path() : dir / "coordinator.key";
  if (!database.empty()) {
    if (!sql::is_postgres_url(database))
      throw Error("the database '" + database + "' is not a postgresql:// URL (SQLite files go in --data DIR)");
    return {database, database, database, database, database, key};
  }
  return {dir / "jobs.sqlite", dir / "ledger.sqlite", dir / "nonces.sqlite", dir / "api_keys.sqlite",
          dir / "model_pins.sqlite", key};
}

namespace {

const std::filesystem::path& made(const std::filesystem::path& dir) {
  if (dir.empty()) return dir;  // a PostgreSQL coordinator needs no folder
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot create the coordinator's data folder: " + ec.message());
  return dir;
}

CoordinatorFiles files_for(const CoordinatorOptions& o) {
  CoordinatorFiles f = coordinator_files(made(o.data_dir), o.database);
  if (!o.signing_key.empty()) f.signing_key = o.signing_key;
  if (f.signing_key.empty())
    throw Error("the coordinator's ledger-signing key has no place: give its file (--key FILE, the same on every "
                "replica) or a data folder (--data DIR keeps DIR/coordinator.key)");
  return f;
}

const char* auth_code(AuthStatus s) {
  switch (s) {
    case AuthStatus::MissingHeader: return "unsigned";
    case AuthStatus::UnknownNode: return "unknown_node";
    case AuthStatus::KeyMismatch: return "key_mismatch";
    case AuthStatus::BadSignature: return "bad_signature";
    case AuthStatus::Stale: return "stale";
    case AuthStatus::Replayed: return "replayed";
    case AuthStatus::Unavailable: return "unavailable";
    case AuthStatus::Malformed:
    case AuthStatus::Ok: break;
  }
  return "malformed";
}

// The request's X-Orchard-* headers; nullopt when one is repeated (which value was signed?).
std::optional<Headers> signing_headers(const httplib::Request& req) {
  Headers out;
  for (const char* name : {kNodeHeader, kKeyHeader, kTimestampHeader, kNonceHeader, kSignatureHeader}) {
    const size_t n = req.get_header_value_count(name);
    if (n > 1) return std::nullopt;
    if (n == 1) out[name] = req.get_header_value(name);
  }
  return out;
}

AuthResult authenticate(Coordinator::State& s, const httplib::Request& req, bool registering) {
  const auto headers = signing_headers(req);
  if (!headers) return {AuthStatus::Malformed, "an X-Orchard header is repeated", {}, {}, false};
  VerifyOptions vo;
  vo.max_skew_ms = s.opts.max_skew_ms;
  vo.allow_unregistered = registering;
  const KeyLookup lookup = [&s](const std::string& id) -> std::optional<std::string> {
    {
      std::lock_guard lock(s.node_keys_mu);
      if (const auto it = s.node_keys.find(id); it != s.node_keys.end()) return it->second;
    }
    const auto key = s.with_store([&](JobStore& st) { return st.node_key(id); });
    if (key) {
      std::lock_guard lock(s.node_keys_mu);
      s.node_keys.emplace(id, *key);
    }
    return key;
  };
  // The target as sent (path and query, undecoded) is what the node signed.
  const std::string& target = req.target.empty() ? req.path : req.target;
  return verify_request(*headers, req.method, target, req.body, unix_ms(), lookup, *s.nonces, vo);
}

serve::EventServerOptions server_options(const CoordinatorOptions& o) {
  serve::EventServerOptions so;
  so.tls = o.tls;
  so.max_body_bytes = o.max_body_bytes;
  so.workers = std::max(4, o.http_threads);
  // A node's connection idles between heartbeats and polls; a parked poll is not a read.
  so.read_timeout = std::chrono::seconds(kMaxPollWaitS + 30);
  so.write_timeout = std::chrono::seconds(30);
  return so;
}

void sweep(Coordinator::State& s) {
  auto next_signing = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.opts.sign_every_ms);
  while (!s.stopping) {
    if (std::chrono::steady_clock::now() >= next_signing) {
      sign_head_if_moved(s);
      next_signing = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.opts.sign_every_ms);
    }
    try {
      settle_due(s);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "coordinator: settling payments failed: %s\n", e.what());
    }
    try {
      const ExpireReport r = s.with_store([](JobStore& st) { return st.expire(unix_ms()); });
      if (!r.abandoned.empty() || !r.failed.empty()) {
        if (s.opts.log)
          for (const auto& [job, attempt] : r.abandoned)
            std::fprintf(stderr, "coordinator: %s attempt %lld abandoned\n", job.c_str(), static_cast<long long>(attempt));
        s.work.notify();
        s.output.notify();
      }
    } catch (const std::exception& e) {
      // A busy or failing file: the next sweep tries again; leases only get more overdue.
      std::fprintf(stderr, "coordinator: lease sweep failed: %s\n", e.what());
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.opts.sweep_interval_ms);
    while (!s.stopping && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

Coordinator::State::State(CoordinatorOptions o)
    : opts(std::move(o)),
      files(files_for(opts)),
      store(JobStore::open(files.jobs, opts.store)),
      ledger(Ledger::open(files.ledger)),
      // The same key file handling as a node's: made once, never silently replaced.
      signer(NodeIdentity::load_or_create(files.signing_key)),
      keys(ApiKeys::open(files.api_keys)),
      nonces(DatabaseNonceStore::open(files.nonces)),
      pins(ModelPins::open(files.model_pins)),
      http(std::make_unique<serve::EventServer>(server_options(opts))) {
  // A network's nodes read and planned before the first client waits on it (100,000: seconds).
  store.warm_index();
}

Payment pay(Coordinator::State& s, const Completion& c) {
  Payment p;
  p.credits = job_credits(c.usage);
  if (p.credits <= 0 || c.client == c.owner) return p;
  json details = to_json(c.usage);
  details["node"] = c.node_id;
  std::lock_guard lock(s.ledger_mu);
  p.ledger_seq = s.ledger.pay(c.job_id, c.attempt, c.client, c.owner, p.credits, details).entry.seq;
  return p;
}

serve::Handler node_endpoint(Coordinator::State& s, bool registering, NodeHandler h) {
  return serve::guarded(serve::openai_error, [&s, registering, h = std::move(h)](const httplib::Request& req,
                                                                                  httplib::Response& res) {
    const AuthResult a = authenticate(s, req, registering);
    if (!a.ok())
      throw ApiError(a.status == AuthStatus::Unavailable ? 503 : 401, "authentication_error",
                     "node request refused: " + a.reason, {}, auth_code(a.status));
    try {
      h(a, req, res);
    } catch (const NotYourJob& e) {
      throw ApiError(403, "permission_error", e.what(), {}, "not_your_job");
    } catch (const Banned& e) {
      throw ApiError(403, "permission_error", e.what(), {}, "banned");
    } catch (const ApiError&) {
      throw;
    } catch (const sql::SqlError& e) {
      throw ApiError(503, "server_error", e.what(), {}, "unavailable");
    } catch (const Error& e) {
      // What the store refuses that is not about ownership: output that contradicts what is
      // stored, an unknown job.
      throw ApiError(409, "invalid_request_error", e.what(), {}, "conflict");
    }
  });
}

Coordinator::Coordinator(CoordinatorOptions options) : s_(std::make_unique<State>(std::move(options))) {
  // Jobs whose window closed while the coordinator was down, or that it completed but did not
  // get to pay before it stopped: paid now, each exactly once (the ledger is checked first).
  settle_due(*s_);
  serve::EventServer& h = *s_->http;
  h.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = "no route " + req.method + " " + req.path;
    if (res.status == 413) msg = "the request body is too large";
    else if (res.status != 404) msg = "HTTP " + std::to_string(res.status);
    serve::send_json(res, serve::openai_error(ApiError(res.status, "invalid_request_error", msg)), res.status);
  });
  if (s_->opts.log)
    h.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      std::fprintf(stderr, "coordinator: %s %s → %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });
  add_node_routes(*s_);
  add_poll_route(*s_);
  add_client_routes(*s_);
  add_ledger_routes(*s_);
  add_world_routes(*s_);
}

Coordinator::~Coordinator() {
  stop();
  if (s_->sweeper.joinable()) s_->sweeper.join();
  if (s_->pump.joinable()) s_->pump.join();
  if (s_->dispatcher.joinable()) s_->dispatcher.join();
}

int Coordinator::bind() {
  State& s = *s_;
  s.port = s.http->bind(s.opts.host, s.opts.port);
  return s.port;
}

void Coordinator::run() {
  State& s = *s_;
  if (s.port < 0) bind();
  s.sweeper = std::thread([&s] { sweep(s); });
  s.pump = std::thread([&s] { run_pump(s); });
  s.dispatcher = std::thread([&s] { run_dispatcher(s); });
  s.http->run();
  // Parked polls are answered and streams ended (the pump) as the threads see `stopping`.
  s.stopping = true;
  s.sweeper.join();
  s.pump.join();
  s.dispatcher.join();
  // What was paid last is signed before the coordinator goes: owners can check it while it is down.
  sign_head_if_moved(s);
}

void Coordinator::stop() {
  // Only sets flags: safe from a signal handler.
  s_->stopping = true;
  s_->http->stop();
}

}  // namespace orchard::network
