// The coordinator's client endpoints (OpenAI's chat/completions and models, with an API key)
// and /health, and the pump that passes stored output on to the clients' streams.
#include "network/coordinator_state.h"
#include "network/protocol_names.h"
#include "serve/http_util.h"
#include "serve/openai.h"
#include "serve/request_params.h"

namespace orchard::network {

using nlohmann::json;
using serve::ApiError;

namespace {

// The account a request's API key belongs to (401 otherwise).
std::string client_account(Coordinator::State& s, const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (auth.rfind(prefix, 0) == 0)
    if (auto account = s.keys.account_for(auth.substr(prefix.size()))) {
      if (const auto wait_ms = s.key_rate.admit(*api_key_hash(auth.substr(prefix.size())), unix_ms())) {
        const int seconds = static_cast<int>((*wait_ms + 999) / 1000);
        throw ApiError(429, "rate_limit_error",
                       "this API key sent more than " + std::to_string(s.key_rate.per_minute()) +
                           " requests in a minute; retry in " + std::to_string(seconds) + " s",
                       {}, "rate_limited")
            .retry_after(seconds);
      }
      return *account;
    }
  throw ApiError(401, "invalid_request_error",
                 "missing, unknown or revoked API key (send Authorization: Bearer <key>; "
                 "`orchard network api-key create ACCOUNT` makes one)",
                 {}, "invalid_api_key");
}

bool online(const NodeView& v, const Coordinator::State& s, int64_t now) {
  return now - v.last_heartbeat_ms <= s.opts.store.heartbeat_timeout_ms;
}

// Prompt tokens guessed from the text (about four bytes a token in English), for placement's
// context check before any node has tokenized it; the node's own count is what is paid.
int64_t estimated_prompt_tokens(const serve::OpenAIRequest& r) {
  size_t bytes = r.prompt.size();
  for (const auto& m : r.messages) bytes += m.content.size() + 16;  // role markers
  return static_cast<int64_t>(bytes / 4) + 1;
}

// Registers `stream` to be fed `job`'s output by the pump; `cancel_on_hang_up`: the job is
// cancelled when the stream's client leaves before the end.
void feed(Coordinator::State& s, const std::string& job, std::shared_ptr<serve::Stream> stream,
          bool cancel_on_hang_up) {
  std::lock_guard lock(s.feeds_mu);
  if (s.stopping) {
    serve::Completion c;
    c.finish_reason = "error";
    c.error = "the coordinator is stopping";
    stream->finish(std::move(c));
    return;
  }
  // A retry with the same Idempotency-Key while the first request is still open: the newer
  // connection is the one the client reads, the older one ends.
  if (auto old = s.feeds.find(job); old != s.feeds.end()) {
    serve::Completion c;
    c.finish_reason = "error";
    c.error = "a newer request with the same Idempotency-Key took over this job's answer";
    old->second.stream->finish(std::move(c));
  }
  s.feeds[job] = {std::move(stream), 0, cancel_on_hang_up};
}

// With --require-credit, a client spends credits it holds: none left, no new job (402). A job
// may take the balance below zero by its own price; the next one is refused.
void check_credit(Coordinator::State& s, const std::string& account) {
  if (!s.opts.require_credit) return;
  int64_t balance = 0;
  {
    std::lock_guard lock(s.ledger_mu);
    balance = s.ledger.balance(account);
  }
  if (balance <= 0)
    throw ApiError(402, "insufficient_quota",
                   "account '" + account + "' has no credits left (balance " + std::to_string(balance) +
                       " micro-credits); `orchard network credit grant " + account + " N` adds some",
                   {}, "insufficient_credits");
}

void generate(Coordinator::State& s, bool chat, const httplib::Request& req, httplib::Response& res) {
  const std::string account = client_account(s, req);
  check_credit(s, account);
  const json body = serve::parse_body(req.body);
  GenerateOptions defaults;
  defaults.max_tokens = s.opts.default_max_tokens;
  const serve::OpenAIRequest r = serve::read_openai_request(body, chat, defaults);
  if (r.n != 1)
    throw ApiError::bad_request("the network runs one choice per job: send n = 1 (or n requests)", "n");
  if (!r.tools.tools.empty())
    throw ApiError::bad_request("the network does not run tool calls yet: call `orchard serve` directly for tools", "tools");
  if (r.model.empty())
    throw ApiError::bad_request("'model' is required: it says which nodes can run the job (GET /v1/models lists them)",
                                "model");
  JobRequest job;
  job.client = account;
  job.model = r.model;
  job.request = {{"api", chat ? kChatApi : kCompletionsApi}, {"body", body}};
  job.max_tokens = r.options.max_tokens;
  job.prompt_tokens = estimated_prompt_tokens(r);
  job.n_ctx = job.prompt_tokens + job.max_tokens;
  // A client that lost the answer (the connection broke, the coordinator restarted) sends the
  // same request with the same Idempotency-Key and gets the job it submitted before, finished
  // or still running, never a second one. The id is the key's hash under the account, so two
  // clients choosing the same key never meet.
  const std::string idempotency_key = req.get_header_value("Idempotency-Key");
  if (!idempotency_key.empty()) job.id = "job-" + sha256_hex(account + '\n' + idempotency_key).substr(0, 32);
  const int64_t now = unix_ms();
  const auto [id, placed, holders, created] = s.with_store([&](JobStore& st) {
    bool created = false;
    std::string id;
    try {
      id = st.submit(job, now, &created);
    } catch (const Error& e) {
      if (idempotency_key.empty()) throw;
      throw ApiError(409, "invalid_request_error",
                     "the Idempotency-Key was used before with a different request: " + std::string(e.what()), {},
                     "idempotency_key_reused");
    }
    const AssignResult a = st.assign(id, now);
    int holders = 0;
    if (a.state == JobState::Failed)
      for (const NodeView& v : st.nodes()) holders += v.info.find_model(r.model) != nullptr;
    return std::tuple{id, a, holders, created};
  });
  // The job's id, also on errors: GET /v1/jobs/{id} tells the client where it ran.
  res.set_header("X-Orchard-Job", id);
  // A repeated job that failed before ends its stream with that error (the pump), like any job.
  if (placed.state == JobState::Failed && created) {
    if (holders == 0)
      throw ApiError(404, "invalid_request_error",
                     "the model '" + r.model + "' does not exist on this network: no registered node holds it "
                     "(GET /v1/models lists the models nodes hold)",
                     "model", "model_not_found");
    throw ApiError(503, "server_error", placed.reason, {}, "no_node_can_take_job");
  }
  s.work.notify();
  auto stream = std::make_shared<serve::Stream>();
  // A client that sent an Idempotency-Key said it will ask again when the connection breaks:
  // its hang-up leaves the job running for that retry, instead of cancelling it.
  feed(s, id, stream, idempotency_key.empty());
  serve::respond_openai(res, r, stream, r.model);
}

// A client's own job: its state and where it ran (404 for another client's, so ids leak nothing).
void job_status(Coordinator::State& s, const httplib::Request& req, httplib::Response& res) {
  const std::string account = client_account(s, req);
  const std::string id = req.matches[1];
  const std::optional<JobStatus> st = s.with_store([&](JobStore& store) -> std::optional<JobStatus> {
    try {
      return store.job(id);
    } catch (const Error&) {
      return std::nullopt;  // no such job
    }
  });
  if (!st || st->client != account)
    throw ApiError(404, "invalid_request_error", "no job '" + id + "' of yours", {}, "job_not_found");
  json j = {{"id", st->id},     {"model", st->model},       {"state", to_string(st->state)},
            {"node_id", st->node_id}, {"attempts", st->attempts}, {"created_ms", st->created_ms},
            {"chunks", st->output.size()}};
  if (!st->error.empty()) j["error"] = st->error;
  if (st->usage)
    j["usage"] = {{"prompt_tokens", st->usage->prompt_tokens},
                  {"completion_tokens", st->usage->generated_tokens},
                  {"finish_reason", st->usage->finish_reason}};
  serve::send_json(res, j);
}

void models(Coordinator::State& s, const httplib::Request& req, httplib::Response& res) {
  client_account(s, req);
  const int64_t now = unix_ms();
  std::map<std::string, int> holders;
  for (const NodeView& v : s.with_store([](JobStore& st) { return st.nodes(); }))
    if (online(v, s, now))
      for (const ModelInfo& m : v.info.models) ++holders[m.name];
  json data = json::array();
  for (const auto& [name, n] : holders)
    data.push_back({{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "orchard-network"}, {"nodes", n}});
  serve::send_json(res, {{"object", "list"}, {"data", data}});
}

json health(Coordinator::State& s) {
  const int64_t now = unix_ms();
  int total = 0, available = 0;
  for (const NodeView& v : s.with_store([](JobStore& st) { return st.nodes(); })) {
    ++total;
    available += online(v, s, now) && !v.draining && v.info.state.status != NodeStatus::Draining;
  }
  return {{"status", "ok"}, {"nodes", total}, {"nodes_available", available}};
}

// The end of a job as the client's stream reports it.
serve::Completion completion_of(const JobStatus& st) {
  serve::Completion c;
  for (const std::string& t : st.output) c.text += t;
  if (st.state == JobState::Failed || st.state == JobState::Cancelled) {
    c.finish_reason = "error";
    c.error = st.state == JobState::Cancelled ? "the job was cancelled" : st.error;
    return c;
  }
  c.finish_reason = st.usage && !st.usage->finish_reason.empty() ? st.usage->finish_reason : "stop";
  c.prompt_tokens = st.usage ? st.usage->prompt_tokens : 0;
  c.completion_tokens = st.usage ? st.usage->generated_tokens : 0;
  return c;
}

// The client of `job` hung up: the job is cancelled, so its node's next chunk is refused and the
// node stops and frees itself; nobody pays (docs/network.md).
void cancel_job(Coordinator::State& s, const std::string& job) {
  try {
    if (s.with_store([&](JobStore& st) { return st.cancel(job, unix_ms()); })) {
      if (s.opts.log) std::fprintf(stderr, "coordinator: job %s cancelled: its client hung up\n", job.c_str());
      s.work.notify();  // its node is free once it hears, and a queued slot opened
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coordinator: cancelling job %s: %s\n", job.c_str(), e.what());
  }
}

// One round: every stream gets the chunks stored since the last round; finished jobs end
// their streams. A stream whose client left cancels its job (unless it carried an Idempotency-Key).
void pump_once(Coordinator::State& s) {
  std::vector<std::string> jobs;
  {
    std::lock_guard lock(s.feeds_mu);
    for (const auto& [id, f] : s.feeds) jobs.push_back(id);
  }
  std::vector<std::string> hung_up;
  for (const std::string& id : jobs) {
    std::optional<JobStatus> st;
    try {
      st = s.with_store([&](JobStore& store) { return store.job(id); });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "coordinator: reading job %s for its stream: %s\n", id.c_str(), e.what());
      continue;
    }
    std::lock_guard lock(s.feeds_mu);
    auto it = s.feeds.find(id);
    if (it == s.feeds.end()) continue;
    Coordinator::State::Feed& f = it->second;
    if (f.stream->cancelled()) {
      if (f.cancel_on_hang_up) hung_up.push_back(id);
      s.feeds.erase(it);
      continue;
    }
    std::string text;
    for (; f.delivered < st->output.size(); ++f.delivered) text += st->output[f.delivered];
    f.stream->push(text);
    if (st->state == JobState::Done || st->state == JobState::Failed || st->state == JobState::Cancelled) {
      f.stream->finish(completion_of(*st));
      s.feeds.erase(it);
    }
  }
  for (const std::string& id : hung_up) cancel_job(s, id);
}

}  // namespace

void run_pump(Coordinator::State& s) {
  while (!s.stopping) {
    pump_once(s);
    s.output.wait_for(std::chrono::milliseconds(200));
  }
  std::lock_guard lock(s.feeds_mu);
  for (auto& [id, f] : s.feeds) {
    serve::Completion c;
    c.finish_reason = "error";
    c.error = "the coordinator is stopping (job " + id + " goes on; its output is kept)";
    f.stream->finish(std::move(c));
  }
  s.feeds.clear();
}

void add_client_routes(Coordinator::State& s) {
  auto client = [&s](void (*f)(Coordinator::State&, const httplib::Request&, httplib::Response&)) {
    return serve::guarded(serve::openai_error, [&s, f](const auto& req, auto& res) { f(s, req, res); });
  };
  // A request without `stream` waits for its whole answer: on a thread of its own, not a pool
  // worker that nodes' output (which ends that wait) needs.
  s.http->post_blocking("/v1/chat/completions", serve::guarded(serve::openai_error, [&s](const auto& req, auto& res) {
                          generate(s, true, req, res);
                        }));
  s.http->post_blocking("/v1/completions", serve::guarded(serve::openai_error, [&s](const auto& req, auto& res) {
                          generate(s, false, req, res);
                        }));
  s.http->Get("/v1/models", client(models));
  s.http->Get(R"(/v1/jobs/([A-Za-z0-9_.:-]+))", client(job_status));
  s.http->Get("/health", client([](Coordinator::State& st, const auto&, auto& res) { serve::send_json(res, health(st)); }));
}

}  // namespace orchard::network
