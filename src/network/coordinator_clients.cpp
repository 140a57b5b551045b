// The coordinator's client endpoints (OpenAI's chat/completions and models, with an API key)
// and its public ones (/health, /v1/world), and the pump that passes stored output on to the
// clients' streams.
#include "network/coordinator_state.h"
#include "network/ledger_hash.h"
#include "network/protocol.h"
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
    if (auto account = s.keys.account_for(auth.substr(prefix.size()))) return *account;
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

// Registers `stream` to be fed `job`'s output by the pump.
void feed(Coordinator::State& s, const std::string& job, std::shared_ptr<serve::Stream> stream) {
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
  s.feeds[job] = {std::move(stream), 0};
}

void generate(Coordinator::State& s, bool chat, const httplib::Request& req, httplib::Response& res) {
  const std::string account = client_account(s, req);
  const json body = serve::parse_body(req.body);
  GenerateOptions defaults;
  defaults.max_tokens = s.opts.default_max_tokens;
  const serve::OpenAIRequest r = serve::read_openai_request(body, chat, defaults);
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
  feed(s, id, stream);
  serve::respond_openai(res, r, stream, r.model);
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

json world(Coordinator::State& s) {
  const int64_t now = unix_ms();
  json nodes = json::array();
  s.with_store([&](JobStore& st) {
    for (const NodeView& v : st.nodes()) {
      const NodeStats n = st.node_stats(v.info.id);
      const json info = to_json(v.info);
      json models = json::array();
      for (const ModelInfo& m : v.info.models) models.push_back(m.name);
      nodes.push_back({{"id", v.info.id},
                       {"owner", v.info.owner},
                       {"hardware", to_string(v.info.hardware)},
                       {"machines", info["machines"]},
                       {"group", info.contains("group") ? info["group"] : json()},
                       {"models", models},
                       {"lending", to_string(v.info.lending)},
                       {"status", v.draining ? "draining" : to_string(v.info.state.status)},
                       {"load", v.info.state.load},
                       {"online", online(v, s, now)},
                       {"last_heartbeat_ms", v.last_heartbeat_ms},
                       {"jobs_served", n.jobs_served},
                       {"tokens_generated", n.tokens_generated},
                       {"reliability", v.reliability},
                       {"active_jobs", v.active_jobs}});
    }
  });
  return {{"nodes", nodes}, {"heartbeat_timeout_ms", s.opts.store.heartbeat_timeout_ms}};
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
  if (st.state == JobState::Failed) {
    c.finish_reason = "error";
    c.error = st.error;
    return c;
  }
  c.finish_reason = st.usage && !st.usage->finish_reason.empty() ? st.usage->finish_reason : "stop";
  c.prompt_tokens = st.usage ? st.usage->prompt_tokens : 0;
  c.completion_tokens = st.usage ? st.usage->generated_tokens : 0;
  return c;
}

// One round: every stream gets the chunks stored since the last round; finished jobs end
// their streams. Streams whose client left are dropped (the job still runs and is paid).
void pump_once(Coordinator::State& s) {
  std::vector<std::string> jobs;
  {
    std::lock_guard lock(s.feeds_mu);
    for (const auto& [id, f] : s.feeds) jobs.push_back(id);
  }
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
      s.feeds.erase(it);
      continue;
    }
    std::string text;
    for (; f.delivered < st->output.size(); ++f.delivered) text += st->output[f.delivered];
    f.stream->push(text);
    if (st->state == JobState::Done || st->state == JobState::Failed) {
      f.stream->finish(completion_of(*st));
      s.feeds.erase(it);
    }
  }
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
  s.http.Post("/v1/chat/completions", serve::guarded(serve::openai_error, [&s](const auto& req, auto& res) {
                generate(s, true, req, res);
              }));
  s.http.Post("/v1/completions", serve::guarded(serve::openai_error, [&s](const auto& req, auto& res) {
                generate(s, false, req, res);
              }));
  s.http.Get("/v1/models", client(models));
  s.http.Get("/v1/world", client([](Coordinator::State& st, const auto&, auto& res) { serve::send_json(res, world(st)); }));
  s.http.Get("/health", client([](Coordinator::State& st, const auto&, auto& res) { serve::send_json(res, health(st)); }));
}

}  // namespace orchard::network
