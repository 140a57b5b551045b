// The coordinator over HTTP with nodes played by the test (signed calls by hand, no model):
// who may call what (unsigned, forged, altered, stale, replayed node requests are 401; a node
// reporting on another node's job is 403), clients' keys and models, a job no node can take
// failing at once, a completed job paid exactly once, a client's Idempotency-Key, a hung-up
// stream cancelling its job (not with an Idempotency-Key), and replicas on PostgreSQL signing
// the ledger with the one key file they are given.
#include <gtest/gtest.h>

#include <future>

#include "network/api_keys.h"
#include "network/billed_usage.h"
#include "network/coordinator_fixture.h"
#include "network/job_store.h"
#include "network/ledger.h"
#include "network/model_pins.h"
#include "network/protocol_names.h"
#include "network/nodes_fixture.h"
#include "network/store_backends.h"

namespace orchard::network {
namespace {

using nlohmann::json;
using test::now_ms;
using test::RunningCoordinator;

NodeIdentity fresh_identity() { return NodeIdentity::from_key(generate_ed25519_key()); }

// A node holding "small-8b" (about 4.5 GB) on a 64 GiB machine, under `identity`'s id.
json description(const NodeIdentity& identity, const std::string& owner) {
  NodeInfo n = testing::single(identity.id(), 64, 200, {testing::kSmall});
  n.owner = owner;
  n.lending = Lending::Dedicated;
  return to_json(n);
}

void register_node(const RunningCoordinator& c, const NodeIdentity& node, const std::string& owner) {
  const auto [status, reply] = c.node_post(node, kRegisterPath, description(node, owner));
  ASSERT_EQ(status, 200) << reply;
  EXPECT_EQ(reply["node_id"], node.id());
  EXPECT_GT(reply["heartbeat_interval_ms"].get<int64_t>(), 0);
}

std::string error_code(const json& reply) {
  return reply.is_object() && reply.contains("error") && reply["error"]["code"].is_string() ? reply["error"]["code"].get<std::string>()
                                                                                          : std::string();
}

TEST(Coordinator, UnsignedForgedAlteredStaleReplayedAndUnknownNodeRequestsAreRefused) {
  RunningCoordinator c("coord-auth");
  const NodeIdentity a = fresh_identity(), b = fresh_identity();
  register_node(c, a, "alice");
  const std::string body = json{{"load", 0.1}, {"status", "available"}}.dump();
  auto call = [&](const Headers& h, const std::string& sent = {}) {
    return c.node_call("POST", kHeartbeatPath, sent.empty() ? body : sent, h);
  };
  // A signed heartbeat passes.
  EXPECT_EQ(call(sign_request(a, "POST", kHeartbeatPath, body, now_ms())).first, 200);
  // Unsigned.
  auto [status, reply] = call({});
  EXPECT_EQ(status, 401);
  EXPECT_EQ(error_code(reply), "unsigned");
  // Forged: b signs but claims a's id, with its own key, then with a's key.
  Headers forged = sign_request(b, "POST", kHeartbeatPath, body, now_ms());
  forged[kNodeHeader] = a.id();
  EXPECT_EQ(call(forged).first, 401);
  forged[kKeyHeader] = a.public_key_hex();
  std::tie(status, reply) = call(forged);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(error_code(reply), "bad_signature");
  // Altered: a signed one body and another is sent.
  std::tie(status, reply) = call(sign_request(a, "POST", kHeartbeatPath, body, now_ms()),
                                 json{{"load", 0.9}, {"status", "draining"}}.dump());
  EXPECT_EQ(status, 401);
  EXPECT_EQ(error_code(reply), "bad_signature");
  // Signed for another path.
  EXPECT_EQ(call(sign_request(a, "POST", kWorkPath, body, now_ms())).first, 401);
  // Stale: two minutes old.
  std::tie(status, reply) = call(sign_request(a, "POST", kHeartbeatPath, body, now_ms() - 120'000));
  EXPECT_EQ(status, 401);
  EXPECT_EQ(error_code(reply), "stale");
  // Replayed: the same request twice.
  const Headers once = sign_request(a, "POST", kHeartbeatPath, body, now_ms());
  EXPECT_EQ(call(once).first, 200);
  std::tie(status, reply) = call(once);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(error_code(reply), "replayed");
  // A well-signed request from a node that never registered.
  std::tie(status, reply) = call(sign_request(b, "POST", kHeartbeatPath, body, now_ms()));
  EXPECT_EQ(status, 401);
  EXPECT_EQ(error_code(reply), "unknown_node");
  // Registering under another node's id.
  std::tie(status, reply) = c.node_post(b, kRegisterPath, description(a, "mallory"));
  EXPECT_EQ(status, 403);
}

TEST(Coordinator, ANodeCannotReportOnAnotherNodesJobAndACompletedJobIsPaidOnce) {
  RunningCoordinator c("coord-owner");
  const NodeIdentity x = fresh_identity(), y = fresh_identity();
  register_node(c, x, "xavier");
  const std::string key = c.api_key("carol");
  auto answer = std::async(std::launch::async, [&] {
    return c.post("/v1/completions", {{"model", "small-8b"}, {"prompt", "Hello"}, {"max_tokens", 4}}, key);
  });
  // x is the only node: the job is x's.
  const auto [polled, work_json] = c.node_post(x, kWorkPath, {{"wait", 10}});
  ASSERT_EQ(polled, 200) << work_json;
  const Work work = work_from_json(work_json);
  EXPECT_EQ(work.model, "small-8b");
  EXPECT_EQ(work.max_tokens, 4);
  EXPECT_EQ(work.request["api"], kCompletionsApi);
  EXPECT_EQ(work.request["body"]["prompt"], "Hello");
  register_node(c, y, "yolanda");

  const std::string job = work.job_id;
  const json chunk = {{"attempt", work.attempt}, {"chunks", {{{"index", 0}, {"text", "stolen"}, {"tokens", {1}}}}}};
  for (const auto& [path, body] :
       std::vector<std::pair<std::string, json>>{{job_path(job, "output"), chunk},
                                                 {job_path(job, "complete"),
                                                  {{"attempt", work.attempt}, {"prompt_tokens", 1}, {"completion_tokens", 1}}},
                                                 {job_path(job, "fail"), {{"attempt", work.attempt}, {"error", "no"}}},
                                                 {job_path(job, "hand-back"), {{"attempt", work.attempt}}}}) {
    const auto [status, reply] = c.node_post(y, path, body);
    EXPECT_EQ(status, 403) << path << " " << reply;
    EXPECT_EQ(error_code(reply), "not_your_job") << path;
  }

  // x streams two chunks (one of them sent twice, as after a lost reply) and completes.
  const json chunks = {{"attempt", work.attempt},
                       {"chunks", {{{"index", 0}, {"text", " wor"}, {"tokens", {7}}}, {{"index", 1}, {"text", "ld"}, {"tokens", {8, 9}}}}}};
  EXPECT_EQ(c.node_post(x, job_path(job, "output"), chunks).second["stored"], 2);
  EXPECT_EQ(c.node_post(x, job_path(job, "output"), chunks).second["stored"], 0);
  const json conflicting = {{"attempt", work.attempt}, {"chunks", {{{"index", 1}, {"text", "lds"}, {"tokens", {8}}}}}};
  EXPECT_EQ(c.node_post(x, job_path(job, "output"), conflicting).first, 409);
  const json done = {{"attempt", work.attempt}, {"prompt_tokens", 2}, {"completion_tokens", 3}, {"finish_reason", "length"}};
  const auto [completed, paid] = c.node_post(x, job_path(job, "complete"), done);
  ASSERT_EQ(completed, 200) << paid;
  EXPECT_TRUE(paid["first"].get<bool>());
  EXPECT_GT(paid["credits"].get<int64_t>(), 0);
  // A retried completion pays nothing more.
  const auto [again, repaid] = c.node_post(x, job_path(job, "complete"), done);
  ASSERT_EQ(again, 200) << repaid;
  EXPECT_FALSE(repaid["first"].get<bool>());
  EXPECT_EQ(repaid["ledger_seq"], paid["ledger_seq"]);

  const auto [status, reply] = answer.get();
  ASSERT_EQ(status, 200) << reply;
  EXPECT_EQ(reply["choices"][0]["text"], " world");
  EXPECT_EQ(reply["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(reply["usage"]["completion_tokens"], 3);

  auto ledger = Ledger::open(c.files().ledger);
  const auto entries = ledger.entries_for("carol");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].job_id, job);
  EXPECT_EQ(entries[0].payee, "xavier");
  EXPECT_EQ(entries[0].amount, paid["credits"].get<int64_t>());
  EXPECT_EQ(ledger.balance("xavier"), paid["credits"].get<int64_t>());
  EXPECT_TRUE(ledger.verify().ok());

  // x's own record, through its signed status call.
  const auto [got, mine] =
      c.node_call("GET", kNodeStatusPath, "", sign_request(x, "GET", kNodeStatusPath, "", now_ms()));
  ASSERT_EQ(got, 200) << mine;
  EXPECT_EQ(mine["jobs_served"], 1);
  EXPECT_EQ(mine["credits_earned"], paid["credits"]);
}

// A client ("carol") asks `path` for `body` and waits for the answer, while node x, registered as
// "xavier" and alone, takes the job; `work.job_id` is empty when no work came.
struct Taken {
  std::future<std::pair<int, json>> answer;
  Work work;
};
Taken ask_and_take(RunningCoordinator& c, const NodeIdentity& x, const std::string& path, const json& body) {
  register_node(c, x, "xavier");
  Taken t;
  t.answer = std::async(std::launch::async, [&c, path, body, key = c.api_key("carol")] { return c.post(path, body, key); });
  const auto [polled, work_json] = c.node_post(x, kWorkPath, {{"wait", 10}});
  EXPECT_EQ(polled, 200) << work_json;
  if (polled == 200) t.work = work_from_json(work_json);
  return t;
}

// A key revoked by its id (what `orchard network api-key revoke` does) is refused on the next
// request, without restarting the coordinator.
// Probation (docs/verification.md): a node is audited at the probation rate until enough of its
// audits passed, then at the network's; audits off means no probation either.
TEST(Coordinator, ANewNodesJobsAreAuditedAtTheProbationRateUntilEnoughPassed) {
  CoordinatorOptions o;
  o.audit_rate = 0.05;
  o.probation_jobs = 3;
  o.probation_audit_rate = 0.5;
  EXPECT_EQ(audit_rate_for(o, 0), 0.5);
  EXPECT_EQ(audit_rate_for(o, 2), 0.5);
  EXPECT_EQ(audit_rate_for(o, 3), 0.05);
  EXPECT_EQ(audit_rate_for(o, 100), 0.05);
  o.probation_audit_rate = 0.01;
  EXPECT_EQ(audit_rate_for(o, 0), 0.05) << "probation never lowers the rate";
  o.probation_audit_rate = 0.5;
  o.probation_jobs = 0;
  EXPECT_EQ(audit_rate_for(o, 0), 0.05) << "no probation";
  o.probation_jobs = 3;
  o.audit_rate = 0;
  EXPECT_EQ(audit_rate_for(o, 0), 0) << "audits off";
}

TEST(Coordinator, ARevokedKeyGets401AtOnce) {
  RunningCoordinator c("coord-owner");
  const std::string key = c.api_key("carol");
  const json body = {{"model", "no-such-model"}, {"prompt", "Hello"}, {"max_tokens", 4}};
  const auto [before, answer] = c.post("/v1/completions", body, key);
  EXPECT_NE(before, 401) << answer;  // known key: refused for the model, not the key
  auto keys = ApiKeys::open(c.files().api_keys);
  ASSERT_EQ(keys.revoke_id(api_key_id(*api_key_hash(key))), "carol");
  const auto [after, refused] = c.post("/v1/completions", body, key);
  EXPECT_EQ(after, 401) << refused;
}

// Each API key may send so many requests a minute (a burst up to it, then the sustained rate):
// the next gets 429 with Retry-After, and another key is not slowed.
TEST(Coordinator, EachKeyIsRateLimitedAndOthersAreNot) {
  RunningCoordinator c("rate-limit", [](CoordinatorOptions& o) { o.requests_per_minute_per_key = 3; });
  const std::string carol = c.api_key("carol"), dave = c.api_key("dave");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.get("/v1/models", carol).first, 200) << i;
  httplib::Headers h{{"Authorization", "Bearer " + carol}};
  auto r = c.client().Get("/v1/models", h);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  const int retry = std::stoi(r->get_header_value("Retry-After"));
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 20);  // one request refills in 20 s at 3 a minute
  EXPECT_NE(r->body.find("rate_limited"), std::string::npos) << r->body;
  EXPECT_EQ(c.get("/v1/models", dave).first, 200);
}

// With --require-credit a client spends credits it was granted: none, 402; once granted, its
// requests go on (here to a model no node has: refused for that, not for credit); the ledger
// still verifies, the issuer's balance the negative of what it issued.
TEST(Coordinator, WithRequireCreditAClientNeedsAPositiveBalance) {
  RunningCoordinator c("require-credit", [](CoordinatorOptions& o) { o.require_credit = true; });
  const std::string key = c.api_key("carol");
  const json body = {{"model", "no-such-model"}, {"prompt", "Hello"}, {"max_tokens", 4}};
  const auto [broke, refused] = c.post("/v1/completions", body, key);
  EXPECT_EQ(broke, 402) << refused;
  EXPECT_EQ(error_code(refused), "insufficient_credits") << refused;
  {
    auto ledger = Ledger::open(c.files().ledger);
    const PayResult g = grant_credits(ledger, "carol", 2 * kMicroPerCredit, "test");
    EXPECT_TRUE(g.inserted);
    EXPECT_EQ(g.entry.payer, kIssuer);
    EXPECT_EQ(g.entry.job_id.rfind("grant-", 0), 0u);
    EXPECT_EQ(ledger.balance("carol"), 2 * kMicroPerCredit);
    EXPECT_EQ(ledger.balance(kIssuer), -2 * kMicroPerCredit);
    EXPECT_TRUE(ledger.verify().ok());
    EXPECT_THROW(grant_credits(ledger, kIssuer, 1, ""), Error);
  }
  const auto [funded, answer] = c.post("/v1/completions", body, key);
  EXPECT_NE(funded, 402) << answer;
  EXPECT_NE(funded, 200) << answer;  // no node has the model
}

// A model name the operator pinned to a file's SHA-256 is served only by nodes holding those
// bytes: another file under the name (a smaller quantization, say) is refused at registration,
// naming both hashes; the pinned file registers.
TEST(Coordinator, APinnedModelNameIsServedOnlyWithThePinnedFile) {
  RunningCoordinator c("model-pins");
  const std::string pinned(64, 'a'), other(64, 'b');
  ModelPins::open(c.files().model_pins).pin({"small-8b", pinned, 1234, 0, std::nullopt});
  const NodeIdentity x = fresh_identity();
  json d = description(x, "xavier");
  for (auto& m : d["models"])
    if (m["name"] == "small-8b") m["sha256"] = other;
  const auto [refused, why] = c.node_post(x, kRegisterPath, d);
  EXPECT_EQ(refused, 409) << why;
  EXPECT_EQ(error_code(why), "model_mismatch") << why;
  EXPECT_NE(why.dump().find(pinned), std::string::npos) << why;
  EXPECT_NE(why.dump().find(other), std::string::npos) << why;
  for (auto& m : d["models"])
    if (m["name"] == "small-8b") m.erase("sha256");
  EXPECT_EQ(c.node_post(x, kRegisterPath, d).first, 409) << "no hash given for a pinned name";
  for (auto& m : d["models"])
    if (m["name"] == "small-8b") m["sha256"] = pinned;
  const auto [ok, reply] = c.node_post(x, kRegisterPath, d);
  EXPECT_EQ(ok, 200) << reply;
}

// A pin made from the file carries its description, and registration describes the pinned
// name by it: a node that says its "small-8b" is a 70B model (for the large size class, or to
// look like it has memory to spare) is recorded, planned for and priced as the pinned file.
TEST(Coordinator, APinnedModelIsDescribedByThePinnedFileNotByTheNode) {
  RunningCoordinator c("model-pin-shape");
  const std::string pinned(64, 'a');
  ModelInfo truth = testing::kSmall;
  truth.sha256 = pinned;
  ModelPins::open(c.files().model_pins).pin({"small-8b", pinned, 1234, 0, truth});
  const auto pin = ModelPins::open(c.files().model_pins).find("small-8b");
  ASSERT_TRUE(pin && pin->description);
  EXPECT_EQ(pin->description->shape.n_layers, truth.shape.n_layers) << "the description round-trips";
  const NodeIdentity x = fresh_identity();
  NodeInfo claim = testing::single(x.id(), 64, 200, {testing::model("small-8b", "llama-3.3-70b")});
  claim.owner = "xavier";
  claim.models[0].sha256 = pinned;
  ASSERT_GT(claim.models[0].shape.n_layers, truth.shape.n_layers);
  const auto [ok, reply] = c.node_post(x, kRegisterPath, to_json(claim));
  ASSERT_EQ(ok, 200) << reply;
  auto store = JobStore::open(c.files().jobs);
  const std::vector<NodeView> nodes = store.nodes();
  ASSERT_EQ(nodes.size(), 1u);
  const ModelInfo& recorded = nodes[0].info.models.at(0);
  EXPECT_EQ(recorded.name, "small-8b");
  EXPECT_EQ(recorded.sha256, pinned);
  EXPECT_EQ(recorded.shape.n_layers, truth.shape.n_layers);
  EXPECT_EQ(recorded.shape.dim, truth.shape.dim);
  EXPECT_EQ(size_class(cost_of(recorded).params), size_class(cost_of(truth).params));
  EXPECT_NE(size_class(cost_of(recorded).params), size_class(cost_of(claim.models[0]).params));
}

// A node that claims more tokens than it produced is paid for what the coordinator relayed:
// the generated tokens it streamed, and no more prompt tokens than the request's text could make.
TEST(Coordinator, ANodeIsPaidForTheTokensItRelayedNotTheCountsItReports) {
  RunningCoordinator c("coord-owner");
  const NodeIdentity x = fresh_identity();
  const json body = {{"model", "small-8b"}, {"messages", {{{"role", "user"}, {"content", "Hello there"}}}}, {"max_tokens", 8}};
  Taken t = ask_and_take(c, x, "/v1/chat/completions", body);
  const Work& work = t.work;
  ASSERT_FALSE(work.job_id.empty());
  const json chunks = {{"attempt", work.attempt},
                       {"chunks", {{{"index", 0}, {"text", "Hi"}, {"tokens", {7}}}, {{"index", 1}, {"text", " you"}, {"tokens", {8, 9}}}}}};
  ASSERT_EQ(c.node_post(x, job_path(work.job_id, "output"), chunks).second["stored"], 2);
  const json inflated = {{"attempt", work.attempt}, {"prompt_tokens", 1'000'000}, {"completion_tokens", 5'000}, {"finish_reason", "stop"}};
  const auto [completed, paid] = c.node_post(x, job_path(work.job_id, "complete"), inflated);
  ASSERT_EQ(completed, 200) << paid;

  const auto [status, reply] = t.answer.get();
  ASSERT_EQ(status, 200) << reply;
  EXPECT_EQ(reply["choices"][0]["message"]["content"], "Hi you");
  EXPECT_EQ(reply["usage"]["completion_tokens"], 3);
  const int64_t prompt_bound = prompt_token_bound(work.request["body"]);
  EXPECT_EQ(reply["usage"]["prompt_tokens"], prompt_bound);
  EXPECT_LT(prompt_bound, 300) << "one short message: its bytes and the template's allowance";

  auto ledger = Ledger::open(c.files().ledger);
  const auto entries = ledger.entries_for("carol");
  ASSERT_EQ(entries.size(), 1u);
  const json details = json::parse(entries[0].details);
  EXPECT_EQ(details["generated_tokens"], 3);
  EXPECT_EQ(details["prompt_tokens"], prompt_bound);
  // The price of those counts in the job's classes (as fixed at assignment).
  const JobUsage relayed{static_cast<uint64_t>(prompt_bound), 3, parse_size_class(details["model_class"].get<std::string>()),
                         parse_hardware_class(details["hardware"].get<std::string>()), details["dedicated"].get<bool>()};
  EXPECT_EQ(entries[0].amount, job_credits(relayed));
  EXPECT_EQ(paid["credits"], entries[0].amount);
}

// An honest count below the cap is taken as reported.
TEST(Coordinator, AnHonestPromptCountIsPaidAsReported) {
  RunningCoordinator c("coord-owner");
  const NodeIdentity x = fresh_identity();
  Taken t = ask_and_take(c, x, "/v1/completions", {{"model", "small-8b"}, {"prompt", "Hello"}, {"max_tokens", 4}});
  const Work& work = t.work;
  ASSERT_FALSE(work.job_id.empty());
  const json chunks = {{"attempt", work.attempt}, {"chunks", {{{"index", 0}, {"text", "!"}, {"tokens", {5}}}}}};
  ASSERT_EQ(c.node_post(x, job_path(work.job_id, "output"), chunks).second["stored"], 1);
  const json done = {{"attempt", work.attempt}, {"prompt_tokens", 2}, {"completion_tokens", 1}, {"finish_reason", "stop"}};
  ASSERT_EQ(c.node_post(x, job_path(work.job_id, "complete"), done).first, 200);
  const auto [status, reply] = t.answer.get();
  ASSERT_EQ(status, 200) << reply;
  EXPECT_EQ(reply["usage"]["prompt_tokens"], 2);
  EXPECT_EQ(reply["usage"]["completion_tokens"], 1);
}

TEST(Coordinator, ClientsNeedAKeyAndAJobNoNodeCanTakeFailsAtOnce) {
  RunningCoordinator c("coord-clients");
  const std::string key = c.api_key("carol");
  const json body = {{"model", "small-8b"}, {"prompt", "Hello"}, {"max_tokens", 4}};
  EXPECT_EQ(c.post("/v1/completions", body, "").first, 401);
  EXPECT_EQ(c.post("/v1/completions", body, "ok-" + std::string(64, '0')).first, 401);
  EXPECT_EQ(c.get("/v1/models").first, 401);
  // No node at all: the model exists nowhere.
  auto [status, reply] = c.post("/v1/completions", body, key);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(error_code(reply), "model_not_found");

  const NodeIdentity n = fresh_identity();
  register_node(c, n, "nadia");
  std::tie(status, reply) = c.get("/v1/models", key);
  ASSERT_EQ(status, 200);
  ASSERT_EQ(reply["data"].size(), 1u);
  EXPECT_EQ(reply["data"][0]["id"], "small-8b");
  // A context no node accepts (the node takes 32768): refused now, naming the node's reason.
  std::tie(status, reply) = c.post("/v1/chat/completions",
                                   {{"model", "small-8b"},
                                    {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                    {"max_tokens", 100'000}},
                                   key);
  EXPECT_EQ(status, 503);
  EXPECT_EQ(error_code(reply), "no_node_can_take_job");
  EXPECT_NE(reply["error"]["message"].get<std::string>().find(n.id()), std::string::npos) << reply;
  // A bad field is the client's 400, naming it.
  std::tie(status, reply) = c.post("/v1/completions", {{"model", "small-8b"}, {"prompt", 3}}, key);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(reply["error"]["param"], "prompt");

  const auto [h, health] = c.get("/health");
  EXPECT_EQ(h, 200);
  EXPECT_EQ(health["nodes"], 1);
  const auto [w, world] = c.get("/v1/world");
  ASSERT_EQ(w, 200);
  ASSERT_EQ(world["nodes"].size(), 1u);
  EXPECT_EQ(world["nodes"][0]["id"], n.id());
  EXPECT_EQ(world["nodes"][0]["owner"], "nadia");
  EXPECT_EQ(world["nodes"][0]["models"], json::array({"small-8b"}));
  EXPECT_TRUE(world["nodes"][0]["online"].get<bool>());
}

// A client re-sending a request with the same Idempotency-Key gets the job it submitted, not a
// second one; the key with another body is a 409; another account's same key is its own job.
TEST(Coordinator, AnIdempotencyKeyNamesOneJobPerAccount) {
  RunningCoordinator c("coord-idempotent");
  const NodeIdentity x = fresh_identity();
  register_node(c, x, "xavier");
  const std::string carol = c.api_key("carol"), dave = c.api_key("dave");
  const json body = {{"model", "small-8b"}, {"prompt", "Hello"}, {"max_tokens", 4}};
  auto ask = [&](const std::string& key, const json& b) {
    const httplib::Headers h = {{"Authorization", "Bearer " + key}, {"Idempotency-Key", "order-17"}};
    auto r = c.client().Post("/v1/completions", h, b.dump(), "application/json");
    return r ? std::tuple{r->status, r->get_header_value("X-Orchard-Job"), json::parse(r->body, nullptr, false)}
             : std::tuple{0, std::string(), json()};
  };
  // x runs whatever it is given: "Hi" as one chunk, then completes.
  auto serve_one = [&] {
    const auto [polled, w] = c.node_post(x, kWorkPath, {{"wait", 10}});
    if (polled != 200) return std::string();
    const Work work = work_from_json(w);
    c.node_post(x, job_path(work.job_id, "output"),
                {{"attempt", work.attempt}, {"chunks", {{{"index", 0}, {"text", "Hi"}, {"tokens", {5}}}}}});
    c.node_post(x, job_path(work.job_id, "complete"),
                {{"attempt", work.attempt}, {"prompt_tokens", 2}, {"completion_tokens", 1}});
    return work.job_id;
  };
  auto first = std::async(std::launch::async, [&] { return ask(carol, body); });
  const std::string ran = serve_one();
  const auto [status, job, reply] = first.get();
  ASSERT_EQ(status, 200) << reply;
  EXPECT_EQ(job, ran);
  // Again: the same job's answer at once, and nothing new for the node.
  const auto [again, same_job, same_reply] = ask(carol, body);
  EXPECT_EQ(again, 200);
  EXPECT_EQ(same_job, job);
  EXPECT_EQ(same_reply["choices"][0]["text"], "Hi");
  EXPECT_EQ(c.node_post(x, kWorkPath, {{"wait", 0}}).first, 204);
  // The key with another request is refused, naming why.
  json other = body;
  other["prompt"] = "Goodbye";
  const auto [conflict, no_job, refused] = ask(carol, other);
  EXPECT_EQ(conflict, 409);
  EXPECT_EQ(error_code(refused), "idempotency_key_reused") << refused;
  // Dave's "order-17" is Dave's own job.
  auto daves = std::async(std::launch::async, [&] { return ask(dave, body); });
  const std::string dave_ran = serve_one();
  EXPECT_EQ(std::get<0>(daves.get()), 200);
  EXPECT_NE(dave_ran, job);
  auto ledger = Ledger::open(c.files().ledger);
  EXPECT_EQ(ledger.entries_for("carol").size(), 1u);
  EXPECT_EQ(ledger.entries_for("dave").size(), 1u);
}

// A coordinator that stopped between recording a completion and paying it pays at its next
// start, and a start after that pays nothing more.
TEST(Coordinator, AStartingCoordinatorPaysJobsCompletedButNotPaidOnce) {
  const auto dir = test::fresh_dir("coord-unpaid");
  {
    auto store = JobStore::open(coordinator_files(dir).jobs);
    NodeInfo n = testing::single("n1", 64, 200, {testing::kSmall});
    n.owner = "olga";
    store.register_node(n, now_ms());
    JobRequest r;
    r.id = "job-u";
    r.client = "carol";
    r.model = "small-8b";
    r.request = {{"api", kCompletionsApi}, {"body", {{"prompt", "Hi"}}}};
    r.n_ctx = 64;
    r.prompt_tokens = 8;
    r.max_tokens = 8;
    store.submit(r, now_ms());
    const auto w = store.next_job_for("n1", now_ms());
    ASSERT_TRUE(w);
    store.complete("job-u", w->attempt, "n1", {8, 8, "length"}, now_ms());
  }
  for (int start = 0; start < 2; ++start) {
    RunningCoordinator c(test::ExistingDir{dir});
    auto ledger = Ledger::open(c.files().ledger);
    const auto entries = ledger.entries_for("carol");
    ASSERT_EQ(entries.size(), 1u) << "start " << start;
    EXPECT_EQ(entries[0].job_id, "job-u");
    EXPECT_EQ(entries[0].payee, "olga");
    EXPECT_TRUE(ledger.verify().ok());
  }
}

// A streamed completion whose client reads the first bytes and hangs up; returns the job's id.
std::string hang_up_stream(const RunningCoordinator& c, const std::string& key, const std::string& idempotency_key) {
  httplib::Headers h = {{"Authorization", "Bearer " + key}};
  if (!idempotency_key.empty()) h.emplace("Idempotency-Key", idempotency_key);
  return c.stream_and_hang_up("/v1/completions",
                              {{"model", "small-8b"}, {"prompt", "Hello"}, {"max_tokens", 64}, {"stream", true}}, h);
}

TEST(Coordinator, AHungUpStreamCancelsItsJobUnlessItCarriedAnIdempotencyKey) {
  RunningCoordinator c("coord-hang-up");
  const NodeIdentity x = fresh_identity();
  register_node(c, x, "xavier");
  const std::string key = c.api_key("carol");
  // Kept: the client said it would ask again. x runs it.
  const std::string kept = hang_up_stream(c, key, "retry-me");
  ASSERT_FALSE(kept.empty()) << "no X-Orchard-Job header";
  const auto [polled, w] = c.node_post(x, kWorkPath, {{"wait", 10}});
  ASSERT_EQ(polled, 200) << w;
  const Work work = work_from_json(w);
  ASSERT_EQ(work.job_id, kept);
  // Cancelled: a plain stream whose client left.
  const std::string dropped = hang_up_stream(c, key, "");
  ASSERT_FALSE(dropped.empty());
  // x streams into the kept job (each chunk a write to its gone client) until the coordinator
  // has noticed the other hang-up; every chunk is taken.
  int index = 0;
  std::string state;
  for (; index < 1000 && state != "cancelled"; ++index) {
    const json chunk = {{"attempt", work.attempt}, {"chunks", {{{"index", index}, {"text", "a"}, {"tokens", {index}}}}}};
    const auto [stored, reply] = c.node_post(x, job_path(kept, "output"), chunk);
    ASSERT_EQ(stored, 200) << "chunk " << index << ": " << reply;
    state = c.get("/v1/jobs/" + dropped, key).second.value("state", "");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(state, "cancelled");
  EXPECT_EQ(c.get("/v1/jobs/" + kept, key).second.value("state", ""), "running");
  const auto [completed, paid] = c.node_post(
      x, job_path(kept, "complete"), {{"attempt", work.attempt}, {"prompt_tokens", 2}, {"completion_tokens", index}});
  ASSERT_EQ(completed, 200) << paid;
  // The retry gets the whole answer of the same job.
  const httplib::Headers h = {{"Authorization", "Bearer " + key}, {"Idempotency-Key", "retry-me"}};
  const json body = {{"model", "small-8b"}, {"prompt", "Hello"}, {"max_tokens", 64}, {"stream", true}};
  auto again = c.client().Post("/v1/completions", h, body.dump(), "application/json");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->get_header_value("X-Orchard-Job"), kept);
  EXPECT_NE(again->body.find("[DONE]"), std::string::npos) << again->body;
  auto ledger = Ledger::open(c.files().ledger);
  const auto entries = ledger.entries_for("carol");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].job_id, kept);
}

// Two replicas on one PostgreSQL database: neither starts without a place for its signing key;
// given the same key file, both serve that key, a job submitted to one and run through the
// other is paid once, and the head they sign verifies under the key.
TEST(Coordinator, ReplicasOnPostgresSignTheLedgerWithTheOneKeyFileTheyAreGiven) {
  test::PostgresServer* pg = test::PostgresServer::require();
  if (!pg) return;
  const std::string url = pg->fresh_database("coord-replicas");
  const auto key_file = test::fresh_dir("coord-replicas") / "coordinator.key";
  CoordinatorOptions keyless;
  keyless.database = url;
  try {
    Coordinator refused(keyless);
    ADD_FAILURE() << "a coordinator on PostgreSQL started without a signing key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--key"), std::string::npos) << e.what();
  }

  RunningCoordinator a(test::OnDatabase{url, key_file}), b(test::OnDatabase{url, key_file});
  const std::string key_hex = NodeIdentity::load_or_create(key_file).public_key_hex();
  EXPECT_EQ(a.get(kLedgerKeyPath).second["public_key"], key_hex);
  EXPECT_EQ(b.get(kLedgerKeyPath).second["public_key"], key_hex);

  const NodeIdentity x = fresh_identity();
  register_node(b, x, "xavier");
  const std::string key = a.api_key("carol");
  auto answer = std::async(std::launch::async, [&] {
    return a.post("/v1/completions", {{"model", "small-8b"}, {"prompt", "Hello"}, {"max_tokens", 4}}, key);
  });
  const auto [polled, w] = b.node_post(x, kWorkPath, {{"wait", 10}});
  ASSERT_EQ(polled, 200) << w;
  const Work work = work_from_json(w);
  b.node_post(x, job_path(work.job_id, "output"),
              {{"attempt", work.attempt}, {"chunks", {{{"index", 0}, {"text", "Hi"}, {"tokens", {5}}}}}});
  const auto [completed, paid] =
      b.node_post(x, job_path(work.job_id, "complete"), {{"attempt", work.attempt}, {"prompt_tokens", 2}, {"completion_tokens", 1}});
  ASSERT_EQ(completed, 200) << paid;
  const auto [status, reply] = answer.get();
  ASSERT_EQ(status, 200) << reply;
  EXPECT_EQ(reply["choices"][0]["text"], "Hi");

  // Signed every 200 ms once the head moved: wait for the head at seq 1 on either replica.
  json head = json::object();
  for (int i = 0; i < 500 && head.value("seq", 0) != 1; ++i) {
    head = (i % 2 ? b : a).get(kLedgerHeadPath).second;
    if (!head.is_object()) head = json::object();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(head.value("seq", 0), 1) << head;
  EXPECT_EQ(head["public_key"], key_hex);
  auto ledger = Ledger::open(url);
  EXPECT_EQ(ledger.entries_for("carol").size(), 1u);
  const VerifyReport r = ledger.verify(public_key_from_hex(key_hex).get());
  EXPECT_TRUE(r.ok()) << (r.violations.empty() ? "" : r.violations.front());
  EXPECT_GE(r.signed_heads, 1);
}

}  // namespace
}  // namespace orchard::network
