// The coordinator's node endpoints (docs/network-protocol.md, "Nodes"): registration,
// heartbeats, the long-poll for work, streamed output, completion (which pays the job), failure
// and hand-back, and a node's own record. Every one is signed (node_endpoint).
#include "network/coordinator_state.h"
#include "network/protocol_names.h"
#include "serve/http_util.h"
#include "serve/request_params.h"

namespace orchard::network {

using nlohmann::json;
using serve::ApiError;

namespace {

// Parsing with the node_info / protocol readers: their errors are the client's fault.
template <class F>
auto parsed(F f) {
  try {
    return f();
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError::bad_request(e.what());
  }
}

void register_node(Coordinator::State& s, const AuthResult& a, const httplib::Request& req, httplib::Response& res) {
  NodeInfo info = parsed([&] { return node_info_from_json(serve::parse_body(req.body)); });
  if (info.id != a.node_id)
    throw ApiError(403, "permission_error",
                   "the description's id '" + info.id + "' is not the signing node's ('" + a.node_id + "')", "id");
  // A pinned name is the pinned bytes: another file under it (a smaller quantization, another
  // model) is refused, naming both hashes.
  for (const ModelInfo& m : info.models) {
    std::optional<ModelPin> pin;
    {
      std::lock_guard lock(s.pins_mu);
      pin = s.pins.find(m.name);
    }
    if (pin && m.sha256 != pin->sha256)
      throw ApiError(409, "invalid_request_error",
                     "model '" + m.name + "': this node's file has sha256 " + (m.sha256.empty() ? "(none given)" : m.sha256) +
                         ", but the network serves '" + m.name + "' as " + pin->sha256 +
                         " (pinned by the coordinator's operator): offer that file under this name, or another name",
                     "models", "model_mismatch");
  }
  // A pinned model is what the pinned file is, whatever size or format the node says it has:
  // the job size class and the memory placement plans for come from the operator's reading.
  describe_as_pinned(info.models, [&s](const std::string& name) {
    std::lock_guard lock(s.pins_mu);
    return s.pins.find(name);
  });
  // The memory check is stored with the registration: placement never sees the node without it.
  const std::optional<MemoryDemand> memory = memory_demand(s, info);
  const auto challenge = s.with_store([&](JobStore& st) { return st.register_node(info, unix_ms(), a.public_key_hex, memory); });
  // The registration challenge: a canary, to the node a client's job like any other, checks
  // that it runs the file it reported and measures how fast (placement trusts that, not the
  // bandwidth it reported).
  send_canary(s, info.id);
  s.work.notify();
  RegisterReply r;
  r.node_id = info.id;
  r.lease_ms = s.opts.store.lease_ms;
  r.heartbeat_timeout_ms = s.opts.store.heartbeat_timeout_ms;
  // Three heartbeats per timeout: one lost or late does not make the node look gone.
  r.heartbeat_interval_ms = std::max<int64_t>(100, std::min(s.opts.store.heartbeat_timeout_ms, s.opts.store.lease_ms) / 3);
  r.memory_challenge = challenge;
  if (challenge && s.opts.log)
    std::fprintf(stderr, "coordinator: node '%s' is asked to prove %llu MiB of memory within %.1f s\n", info.id.c_str(),
                 static_cast<unsigned long long>(challenge->bytes() >> 20),
                 static_cast<double>(challenge->due_ms - challenge->issued_ms) / 1000);
  serve::send_json(res, to_json(r));
}

void heartbeat(Coordinator::State& s, const AuthResult& a, const httplib::Request& req, httplib::Response& res) {
  const HeartbeatState state = parsed([&] { return heartbeat_from_json(serve::parse_body(req.body)); });
  s.with_store([&](JobStore& st) { st.heartbeat(a.node_id, state, unix_ms()); });
  s.work.notify();  // a node that became available may take queued jobs
  serve::send_json(res, {{"ok", true}});
}

void append_output(Coordinator::State& s, const AuthResult& a, const httplib::Request& req, httplib::Response& res) {
  const std::string job = req.matches[1];
  const json body = serve::parse_body(req.body);
  const auto attempt = body_field<int64_t>(body, "attempt");
  const auto chunks = parsed([&] {
    std::vector<OutputChunk> out;
    for (const json& c : body_field<json>(body, "chunks")) out.push_back(chunk_from_json(c));
    return out;
  });
  int stored = 0;
  int64_t tokens = 0;
  s.with_store([&](JobStore& st) {
    for (const OutputChunk& c : chunks)
      if (st.append_output(job, attempt, a.node_id, c.index, c.text, unix_ms(), c.tokens)) {
        ++stored;
        tokens += static_cast<int64_t>(c.tokens.size());
      }
  });
  if (tokens > 0) s.tokens.add(a.node_id, tokens, unix_ms());
  s.output.notify();
  serve::send_json(res, {{"stored", stored}});
}

void complete(Coordinator::State& s, const AuthResult& a, const httplib::Request& req, httplib::Response& res) {
  const std::string job = req.matches[1];
  const json body = serve::parse_body(req.body);
  Usage usage;
  usage.prompt_tokens = body_field<int64_t>(body, "prompt_tokens");
  usage.generated_tokens = body_field<int64_t>(body, "completion_tokens");
  if (body.contains("finish_reason")) usage.finish_reason = body_field<std::string>(body, "finish_reason");
  const auto attempt = body_field<int64_t>(body, "attempt");
  const Completion c = s.with_store([&](JobStore& st) { return st.complete(job, attempt, a.node_id, usage, unix_ms()); });
  s.output.notify();
  s.work.notify();  // the node has a free slot again
  // Paid after the store recorded the completion, once its audit window closed: a failure in
  // between is repaired by the sweep's next round (settle_due).
  json reply = settle_completion(s, c);
  reply["first"] = c.first;
  serve::send_json(res, reply);
}

void fail(Coordinator::State& s, const AuthResult& a, const httplib::Request& req, httplib::Response& res) {
  const json body = serve::parse_body(req.body);
  const auto attempt = body_field<int64_t>(body, "attempt");
  const auto error = body_field<std::string>(body, "error");
  s.with_store([&](JobStore& st) { st.fail(req.matches[1], attempt, a.node_id, error, unix_ms()); });
  s.output.notify();
  s.work.notify();
  serve::send_json(res, {{"ok", true}});
}

void hand_back(Coordinator::State& s, const AuthResult& a, const httplib::Request& req, httplib::Response& res) {
  const auto attempt = body_field<int64_t>(serve::parse_body(req.body), "attempt");
  s.with_store([&](JobStore& st) { st.hand_back(req.matches[1], attempt, a.node_id, unix_ms()); });
  s.work.notify();
  serve::send_json(res, {{"ok", true}});
}

void node_status(Coordinator::State& s, const AuthResult& a, const httplib::Request&, httplib::Response& res) {
  const NodeStats n = s.with_store([&](JobStore& st) { return st.node_stats(a.node_id); });
  int64_t node_earned = 0, owner_earned = 0, balance = 0;
  {
    std::lock_guard lock(s.ledger_mu);
    for (const Entry& e : s.ledger.entries_for(n.owner)) {
      if (e.payee != n.owner) continue;
      owner_earned += e.amount;
      if (json::parse(e.details, nullptr, false).value("node", "") == a.node_id) node_earned += e.amount;
    }
    balance = s.ledger.balance(n.owner);
  }
  serve::send_json(res, {{"node_id", n.node_id},
                         {"owner", n.owner},
                         {"jobs_served", n.jobs_served},
                         {"tokens_generated", n.tokens_generated},
                         {"abandoned", n.abandoned},
                         {"handed_back", n.handed_back},
                         {"active_jobs", n.active_jobs},
                         {"reliability", n.reliability},
                         {"draining", n.draining},
                         {"banned", n.banned},
                         {"audits_passed", n.audits_passed},
                         {"audits_failed", n.audits_failed},
                         {"pending_jobs", n.pending_jobs},
                         {"memory_proven_bytes", n.memory_proven},
                         {"memory_check_pending", n.memory_check_pending},
                         {"credits_earned", node_earned},
                         {"owner_earned", owner_earned},
                         {"owner_balance", balance}});
}

using Action = void (*)(Coordinator::State&, const AuthResult&, const httplib::Request&, httplib::Response&);

}  // namespace

void add_node_routes(Coordinator::State& s) {
  auto route = [&s](Action f, bool registering = false) {
    return node_endpoint(s, registering, [&s, f](const AuthResult& a, const auto& req, auto& res) { f(s, a, req, res); });
  };
  const std::string job = R"(/v1/node/jobs/([A-Za-z0-9_.:-]+))";
  s.http->Post(kRegisterPath, route(register_node, true));
  s.http->Post(kHeartbeatPath, route(heartbeat));
  s.http->Post(job + "/output", route(append_output));
  s.http->Post(job + "/complete", route(complete));
  s.http->Post(job + "/fail", route(fail));
  s.http->Post(job + "/hand-back", route(hand_back));
  s.http->Get(kNodeStatusPath, route(node_status));
  add_memory_check_routes(s);
}

}  // namespace orchard::network
