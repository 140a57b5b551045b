// Nodes that misbehave on purpose (issue 26), as real processes beside a real coordinator:
// `orchard node --cheat MODE`, or two agents sharing one key; each checked to gain nothing by it.
#include <gtest/gtest.h>
#include <httplib.h>

#include "network/billed_usage.h"
#include "network/coordinator.h"
#include "network/job_store.h"
#include "network/ledger.h"
#include "network/protocol_names.h"
#include "network/test_files.h"
#include "network/test_processes.h"
#include "test_data.h"

namespace orchard::network {
namespace {

using dist::testing::Proc;
using nlohmann::json;

// A node that reports ten times the tokens it used, plus a thousand, is paid for the tokens it
// streamed through the coordinator and at most the prompt the request's text could make.
TEST(CheatingNode, InflatedTokenCountsAreNotWhatIsPaid) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const std::string bin = ::orchard::test::orchard_binary();
  const std::string model = ::orchard::test::data_file("models/stories260K.gguf").string();
  const auto dir = test::fresh_dir("cheating-inflate");
  const std::string key = test::api_key(bin, "alice", {"--data", dir.string()});
  ASSERT_FALSE(key.empty());
  const int port = test::free_port();
  Proc coordinator = dist::testing::spawn(
      {bin, "network", "serve", "--port", std::to_string(port), "--data", dir.string(), "--audit-window", "0"}, {}, "coordinator");
  Proc node = dist::testing::spawn({bin, "node", "--coordinator", "http://127.0.0.1:" + std::to_string(port), "-m", model,
                                    "--name", "stories260K", "--key", (dir / "cheat.key").string(), "--owner", "mallory",
                                    "--dedicated", "--bandwidth", "20", "-t", "1", "--poll-wait", "2", "--cheat",
                                    "inflate-tokens"},
                                   {}, "cheating-node");
  test::wait_healthy(port, 1, coordinator);
  if (HasFatalFailure()) {
    test::kill_and_wait(node, SIGKILL);
    test::kill_and_wait(coordinator, SIGKILL);
    return;
  }
  std::vector<json> usages;
  std::vector<int64_t> bounds;
  for (int i = 0; i < 4; ++i) {
    const json body = {{"model", "stories260K"}, {"prompt", "Once upon a time, " + std::to_string(i)}, {"max_tokens", 8}, {"temperature", 0}};
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    auto r = c.Post("/v1/completions", {{"Authorization", "Bearer " + key}}, body.dump(), "application/json");
    ASSERT_TRUE(r) << "no answer";
    ASSERT_EQ(r->status, 200) << r->body;
    usages.push_back(json::parse(r->body)["usage"]);
    bounds.push_back(prompt_token_bound(body));
  }
  test::kill_and_wait(node, SIGTERM);
  test::kill_and_wait(coordinator, SIGTERM);
  // The node did claim the inflated counts (its log says what it was paid for them).
  EXPECT_NE(node.err().find("done"), std::string::npos) << node.err();

  auto ledger = Ledger::open(coordinator_files(dir, "").ledger);
  const auto entries = ledger.entries_for("mallory");
  ASSERT_EQ(entries.size(), usages.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const json d = json::parse(entries[i].details);
    SCOPED_TRACE(entries[i].details);
    // Generated: what it streamed (max_tokens 8), never the claimed 10 × n + 1000.
    EXPECT_GE(d["generated_tokens"].get<int64_t>(), 1);
    EXPECT_LE(d["generated_tokens"].get<int64_t>(), 8);
    EXPECT_EQ(d["generated_tokens"], usages[i]["completion_tokens"]);
    // Prompt: the claim (over 1000) capped by the request's text.
    EXPECT_EQ(d["prompt_tokens"].get<int64_t>(), bounds[i]);
    const JobUsage paid{d["prompt_tokens"].get<uint64_t>(), d["generated_tokens"].get<uint64_t>(),
                        parse_size_class(d["model_class"].get<std::string>()),
                        parse_hardware_class(d["hardware"].get<std::string>()), d["dedicated"].get<bool>()};
    EXPECT_EQ(entries[i].amount, job_credits(paid));
  }
  EXPECT_TRUE(ledger.verify().ok());
}


// Two agents on one machine and one key under different owners: the second stops with a message
// naming the key while the first runs, and the first's jobs are credited to its owner.
TEST(CheatingNode, ASecondAgentOnTheSameKeyIsRefusedAndTheFirstKeepsItsCredits) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const std::string bin = ::orchard::test::orchard_binary();
  const std::string model = ::orchard::test::data_file("models/stories260K.gguf").string();
  const auto dir = test::fresh_dir("cheating-two-owners");
  const std::string key = test::api_key(bin, "alice", {"--data", dir.string()});
  const int port = test::free_port();
  Proc coordinator = dist::testing::spawn(
      {bin, "network", "serve", "--port", std::to_string(port), "--data", dir.string(), "--audit-window", "0"}, {}, "coordinator");
  auto node_argv = [&](const std::string& owner, bool dedicated) {
    return std::vector<std::string>{bin, "node", "--coordinator", "http://127.0.0.1:" + std::to_string(port), "-m", model,
                                    "--name", "stories260K", "--key", (dir / "shared.key").string(), "--owner", owner,
                                    dedicated ? "--dedicated" : "--when-idle", "--idle-load", "100", "--bandwidth", "20",
                                    "-t", "1", "--poll-wait", "2"};
  };
  Proc bob = dist::testing::spawn(node_argv("bob", true), {}, "bob");
  test::wait_healthy(port, 1, coordinator);
  Proc carol = dist::testing::spawn(node_argv("carol", false), {}, "carol");
  EXPECT_TRUE(dist::testing::wait_all({&carol}, std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  EXPECT_NE(dist::testing::exit_code(carol), 0);
  EXPECT_NE(carol.err().find("another orchard node"), std::string::npos) << carol.err();
  EXPECT_NE(carol.err().find((dir / "shared.key").string()), std::string::npos) << carol.err();

  for (int i = 0; i < 3 && !HasFailure(); ++i) {
    const json body = {{"model", "stories260K"}, {"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}};
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    auto r = c.Post("/v1/completions", {{"Authorization", "Bearer " + key}}, body.dump(), "application/json");
    ASSERT_TRUE(r) << "no answer";
    EXPECT_EQ(r->status, 200) << r->body;
  }
  test::kill_and_wait(bob, SIGTERM);
  test::kill_and_wait(coordinator, SIGTERM);
  auto ledger = Ledger::open(coordinator_files(dir, "").ledger);
  EXPECT_EQ(ledger.entries_for("bob").size(), 3u);
  EXPECT_TRUE(ledger.entries_for("carol").empty());
}

// A node offering other bytes under a pinned name — here another model file, as a smaller
// quantization would be — is refused at registration naming both hashes, while a node with the
// pinned file serves; `orchard network model pin` hashes the file as sha256sum does.
TEST(CheatingNode, AnotherFileUnderAPinnedNameIsRefused) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const std::string bin = ::orchard::test::orchard_binary();
  const std::string model = ::orchard::test::data_file("models/stories260K.gguf").string();
  const auto dir = test::fresh_dir("cheating-pinned");
  const std::string data = (dir / "data").string(), impostor = (dir / "impostor.gguf").string();
  test::run({bin, "make-model", "--shape", "tiny", "--type", "Q8_0", "--seed", "3", "-o", impostor}, "make-model");
  const std::string pinned = test::run({bin, "network", "model", "pin", "stories260K", model, "--data", data}, "pin");
  const std::string listed = test::run({bin, "network", "model", "list", "--data", data}, "list");
  const std::string reference = test::run({"/usr/bin/sha256sum", model}, "sha256sum").substr(0, 64);
  EXPECT_NE(pinned.find(reference), std::string::npos) << pinned << " vs sha256sum " << reference;
  EXPECT_NE(listed.find(reference), std::string::npos) << listed;
  const int port = test::free_port();
  Proc coordinator = dist::testing::spawn({bin, "network", "serve", "--port", std::to_string(port), "--data", data}, {}, "coordinator");
  auto node = [&](const std::string& name, const std::string& file) {
    return dist::testing::spawn({bin, "node", "--coordinator", "http://127.0.0.1:" + std::to_string(port), "-m", file,
                                 "--name", "stories260K", "--key", (dir / (name + ".key")).string(), "--owner", name,
                                 "--dedicated", "--bandwidth", "20", "-t", "1", "--poll-wait", "2"},
                                {}, name);
  };
  Proc honest = node("honest", model);
  test::wait_healthy(port, 1, coordinator);
  Proc cheat = node("cheat", impostor);
  EXPECT_TRUE(dist::testing::wait_all({&cheat}, std::chrono::steady_clock::now() + std::chrono::seconds(60)));
  EXPECT_NE(dist::testing::exit_code(cheat), 0);
  EXPECT_NE(cheat.err().find("the network serves 'stories260K' as " + reference), std::string::npos) << cheat.err();
  test::kill_and_wait(honest, SIGTERM);
  test::kill_and_wait(coordinator, SIGTERM);
}

// A node that sits on a job past its lease, saying nothing, then streams it as its own: by
// then the job is another node's, which finished it; everything the late node sends is refused
// (not your job) and only the node that served the client is paid.
TEST(CheatingNode, ANodeReportingOnAJobThatMovedToAnotherNodeIsRefusedAndUnpaid) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const std::string bin = ::orchard::test::orchard_binary();
  const std::string model = ::orchard::test::data_file("models/stories260K.gguf").string();
  const auto dir = test::fresh_dir("cheating-late");
  const std::string key = test::api_key(bin, "carol", {"--data", dir.string()});
  const int port = test::free_port();
  Proc coordinator = dist::testing::spawn({bin, "network", "serve", "--port", std::to_string(port), "--data", dir.string(),
                                           "--lease", "3", "--audit-window", "0", "--audit-rate", "0"},
                                          {}, "coordinator");
  auto node = [&](const std::string& owner, const std::string& bandwidth, const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {bin, "node", "--coordinator", "http://127.0.0.1:" + std::to_string(port), "-m", model,
                                     "--name", "stories260K", "--key", (dir / (owner + ".key")).string(), "--owner", owner,
                                     "--dedicated", "--bandwidth", bandwidth, "-t", "1", "--poll-wait", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return dist::testing::spawn(argv, {}, owner);
  };
  // The late node claims a little more bandwidth, so the job goes to it first; once it has
  // abandoned it (reliability × 0.7) the next attempt goes to alice.
  Proc mallory = node("mallory", "25", {"--cheat", "late-report"});
  Proc alice = node("alice", "20", {});
  test::wait_healthy(port, 2, coordinator);
  if (!HasFatalFailure()) {
    const json body = {{"model", "stories260K"}, {"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}};
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    auto r = c.Post("/v1/completions", {{"Authorization", "Bearer " + key}}, body.dump(), "application/json");
    ASSERT_TRUE(r) << "no answer";
    EXPECT_EQ(r->status, 200) << r->body;
    // The late node wakes up and reports on the job that is no longer its own.
    for (int i = 0; i < 200 && mallory.err().find("lost") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  test::kill_and_wait(mallory, SIGTERM);
  test::kill_and_wait(alice, SIGTERM);
  test::kill_and_wait(coordinator, SIGTERM);
  EXPECT_NE(mallory.err().find("lost"), std::string::npos) << mallory.err();
  EXPECT_NE(mallory.err().find("not yours to run any more"), std::string::npos) << mallory.err();
  auto ledger = Ledger::open(coordinator_files(dir, "").ledger);
  EXPECT_TRUE(ledger.entries_for("mallory").empty());
  EXPECT_EQ(ledger.entries_for("alice").size(), 1u) << alice.err();
  auto store = JobStore::open(coordinator_files(dir, "").jobs);
  for (const NodeView& v : store.nodes()) {
    if (v.info.owner == "mallory") {
      EXPECT_LT(v.reliability, 1.0) << "its abandoned attempt counts against it";
    }
  }
}

}  // namespace
}  // namespace orchard::network
