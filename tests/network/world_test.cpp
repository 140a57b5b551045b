// GET /v1/world and the world page: each node's state as the page shows it (idle, busy while it
// holds a job, draining when it says so, offline once silent past the heartbeat timeout), its
// record and tokens/s, and the totals; nothing secret in it. Nodes are played by the test.
#include <gtest/gtest.h>

#include <future>

#include "network/coordinator_fixture.h"
#include "network/protocol_names.h"
#include "network/nodes_fixture.h"

namespace orchard::network {
namespace {

using nlohmann::json;
using test::RunningCoordinator;

void register_node(const RunningCoordinator& c, const NodeIdentity& node, const std::string& owner, NodeStatus status) {
  NodeInfo n = testing::single(node.id(), 64, 200, {testing::kSmall});
  n.owner = owner;
  n.lending = status == NodeStatus::Draining ? Lending::WhenIdle : Lending::Dedicated;
  n.state.status = status;
  const auto [code, reply] = c.node_post(node, kRegisterPath, to_json(n));
  ASSERT_EQ(code, 200) << reply;
}

json world(const RunningCoordinator& c) {
  const auto [status, w] = c.get("/v1/world");
  EXPECT_EQ(status, 200);
  return w;
}

json node_in(const json& w, const std::string& id) {
  for (const json& n : w["nodes"])
    if (n["id"] == id) return n;
  ADD_FAILURE() << id << " is not in " << w;
  return json::object();
}

TEST(World, ShowsEachNodesStateRecordAndTheTotals) {
  RunningCoordinator c("world");
  const NodeIdentity x = NodeIdentity::from_key(generate_ed25519_key());
  const NodeIdentity d = NodeIdentity::from_key(generate_ed25519_key());
  register_node(c, x, "xavier", NodeStatus::Available);
  register_node(c, d, "dora", NodeStatus::Draining);
  json w = world(c);
  EXPECT_EQ(node_in(w, x.id())["state"], "idle");
  EXPECT_EQ(node_in(w, d.id())["state"], "draining");
  EXPECT_EQ(node_in(w, d.id())["lending"], "when-idle");
  EXPECT_EQ(w["totals"]["nodes"], 2);
  EXPECT_EQ(w["totals"]["nodes_online"], 2);
  EXPECT_EQ(w["totals"]["machines"], 2);
  EXPECT_EQ(w["totals"]["memory_bytes"], 2 * (uint64_t{64} << 30));
  EXPECT_EQ(w["totals"]["jobs_done"], 0);
  // Nothing secret: no key of any kind, no client account.
  for (const json& n : w["nodes"])
    for (const auto& [k, v] : n.items()) EXPECT_EQ(k.find("key"), std::string::npos) << k;

  // A job on x: busy while it holds it, with the tokens it streams counted as they arrive.
  const std::string key = c.api_key("carol");
  auto answer = std::async(std::launch::async, [&] {
    return c.post("/v1/completions", {{"model", "small-8b"}, {"prompt", "Hello"}, {"max_tokens", 4}}, key);
  });
  const auto [polled, work_json] = c.node_post(x, kWorkPath, {{"wait", 10}});
  ASSERT_EQ(polled, 200) << work_json;
  const Work work = work_from_json(work_json);
  w = world(c);
  EXPECT_EQ(node_in(w, x.id())["state"], "busy");
  EXPECT_EQ(node_in(w, x.id())["active_jobs"], 1);
  EXPECT_EQ(w["totals"]["jobs_running"], 1);
  const json chunks = {{"attempt", work.attempt},
                       {"chunks", {{{"index", 0}, {"text", " wor"}, {"tokens", {7}}}, {{"index", 1}, {"text", "ld"}, {"tokens", {8, 9}}}}}};
  ASSERT_EQ(c.node_post(x, job_path(work.job_id, "output"), chunks).first, 200);
  w = world(c);
  // Three tokens over the 10 s window.
  EXPECT_DOUBLE_EQ(node_in(w, x.id())["tokens_per_second"].get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(w["totals"]["tokens_per_second"].get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(node_in(w, d.id())["tokens_per_second"].get<double>(), 0.0);
  const json done = {{"attempt", work.attempt}, {"prompt_tokens", 2}, {"completion_tokens", 3}, {"finish_reason", "length"}};
  ASSERT_EQ(c.node_post(x, job_path(work.job_id, "complete"), done).first, 200);
  ASSERT_EQ(answer.get().first, 200);
  w = world(c);
  EXPECT_EQ(node_in(w, x.id())["state"], "idle");
  EXPECT_EQ(node_in(w, x.id())["jobs_served"], 1);
  EXPECT_EQ(node_in(w, x.id())["tokens_generated"], 3);
  EXPECT_EQ(w["totals"]["jobs_done"], 1);
  EXPECT_EQ(w["totals"]["jobs_running"], 0);

  // Neither sends heartbeats: both go offline once the timeout (1.5 s here) passes.
  for (int i = 0; i < 1000 && world(c)["totals"]["nodes_online"] != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  w = world(c);
  EXPECT_EQ(node_in(w, x.id())["state"], "offline");
  EXPECT_EQ(node_in(w, d.id())["state"], "offline");
  EXPECT_EQ(w["totals"]["nodes"], 2);
}

TEST(World, ThePageIsServedAtTheRootAndAtWorld) {
  RunningCoordinator c("world-page");
  for (const char* path : {"/", "/world"}) {
    auto r = c.client().Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_NE(r->get_header_value("Content-Type").find("text/html"), std::string::npos);
    EXPECT_NE(r->body.find("<title>Orchard network</title>"), std::string::npos);
    EXPECT_NE(r->body.find("fetch('/v1/world'"), std::string::npos);
  }
}

}  // namespace
}  // namespace orchard::network
