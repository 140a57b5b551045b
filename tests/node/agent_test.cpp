// The network end to end, in process: a coordinator on a free localhost port and node agents
// in threads running stories260K. Greedy answers through the network equal the local engine's,
// whole and streamed; every job is paid once and the ledger verifies; a node that dies (or
// drains) mid-stream has its job resumed on another node and the client's stream is still the
// complete, correct text; a node whose user comes back hands its job back and finishes it once
// the user is away again.
#include "node/agent.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <set>

#include "network/coordinator_fixture.h"
#include "network/job_store.h"
#include "network/ledger.h"
#include "serve/service.h"
#include "sse.h"
#include "test_data.h"

namespace orchard::node {
namespace {

using network::test::RunningCoordinator;
using nlohmann::json;

std::string model_path() { return test::data_file("models/stories260K.gguf").string(); }

// One agent running in a thread, with its own engine (one thread: the kernels' pool is
// process-wide, and two agents share this process).
struct RunningNode {
  std::unique_ptr<Agent> agent;
  std::thread thread;

  RunningNode(const RunningCoordinator& c, const std::string& owner,
              std::function<void(const std::string&, int64_t)> on_chunk = {},
              const std::function<void(AgentOptions&)>& tweak = {}) {
    AgentOptions o;
    o.coordinator = c.url();
    o.owner = owner;
    o.lending.mode = protocol::Lending::Dedicated;
    o.bandwidth_gbs = 10;
    o.poll_wait_s = 1;
    o.log = false;
    o.on_chunk = std::move(on_chunk);
    if (tweak) tweak(o);
    std::vector<ServedModel> models;
    models.push_back(load_served_model(model_path(), "stories260K", 1, 0));
    agent = std::make_unique<Agent>(o, protocol::NodeIdentity::from_key(protocol::generate_ed25519_key()),
                                    std::move(models));
    thread = std::thread([this] {
      try {
        agent->run();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "agent: " << e.what();
      }
    });
  }
  ~RunningNode() { stop(); }
  void stop() {
    agent->drain();
    if (thread.joinable()) thread.join();
  }
};

void wait_for_nodes(const RunningCoordinator& c, int n) {
  for (int i = 0; i < 3000; ++i) {
    if (c.get("/health").second.value("nodes_available", 0) >= n) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL() << "fewer than " << n << " nodes registered";
}

// What `orchard generate` prints for the prompt, greedy.
GenerateResult reference(const std::string& prompt, int max_tokens) {
  EngineOptions eo;
  eo.model_path = model_path();
  eo.threads = 1;
  auto engine = Engine::load(eo);
  GenerateOptions g;
  g.max_tokens = max_tokens;
  g.sampling = SamplerOptions::greedy();
  return engine->generate(prompt, g);
}

json completion(const std::string& prompt, int max_tokens, bool stream) {
  return {{"model", "stories260K"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream}};
}

// The text of a streamed completion; empty (and a test failure) when the stream is not whole.
std::string streamed_text(const RunningCoordinator& c, const std::string& path, const json& body, const std::string& key) {
  httplib::Headers h{{"Authorization", "Bearer " + key}};
  auto r = c.client().Post(path, h, body.dump(), "application/json");
  if (!r) {
    ADD_FAILURE() << "no answer";
    return {};
  }
  EXPECT_EQ(r->status, 200) << r->body;
  const auto lines = test::sse_data(r->body);
  EXPECT_FALSE(lines.empty());
  if (lines.empty()) return {};
  EXPECT_EQ(lines.back(), "[DONE]") << r->body;
  std::string text;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    const json chunk = json::parse(lines[i]);
    EXPECT_FALSE(chunk.contains("error")) << lines[i];
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (choice.contains("text")) text += choice["text"].get<std::string>();
    if (choice.contains("delta") && choice["delta"].contains("content"))
      text += choice["delta"]["content"].get<std::string>();
  }
  return text;
}

#define REQUIRE_MODEL()                                                                    \
  do {                                                                                     \
    ORCHARD_REQUIRE_FILES("models/stories260K.gguf");                                      \
    if (!std::filesystem::exists(model_path())) GTEST_SKIP() << model_path() << " is absent"; \
  } while (0)

TEST(Network, AnswersEqualTheLocalEngineWholeAndStreamedAndEachJobIsPaidOnce) {
  REQUIRE_MODEL();
  const std::string prompt = "Once upon a time";
  const GenerateResult ref = reference(prompt, 40);
  RunningCoordinator c("net-answers");
  RunningNode a(c, "alice"), b(c, "bob");
  wait_for_nodes(c, 2);
  const std::string key = c.api_key("carol");

  const auto [status, whole] = c.post("/v1/completions", completion(prompt, 40, false), key);
  ASSERT_EQ(status, 200) << whole;
  EXPECT_EQ(whole["choices"][0]["text"], ref.text);
  EXPECT_EQ(whole["usage"]["prompt_tokens"], ref.prompt_tokens.size());
  EXPECT_EQ(whole["usage"]["completion_tokens"], ref.tokens.size());
  EXPECT_EQ(whole["model"], "stories260K");
  EXPECT_EQ(streamed_text(c, "/v1/completions", completion(prompt, 40, true), key), ref.text);

  // Chat: the node builds the prompt with the model's template, as `orchard serve` does.
  const json chat = {{"model", "stories260K"},
                     {"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                     {"max_tokens", 24},
                     {"temperature", 0}};
  const auto [chat_status, chat_whole] = c.post("/v1/chat/completions", chat, key);
  ASSERT_EQ(chat_status, 200) << chat_whole;
  const std::string content = chat_whole["choices"][0]["message"]["content"];
  EXPECT_FALSE(content.empty());
  json chat_stream = chat;
  chat_stream["stream"] = true;
  EXPECT_EQ(streamed_text(c, "/v1/chat/completions", chat_stream, key), content);

  a.stop();
  b.stop();
  EXPECT_EQ(a.agent->jobs_completed() + b.agent->jobs_completed(), 4);
  auto ledger = network::Ledger::open(c.files().ledger);
  const auto entries = ledger.entries_for("carol");
  ASSERT_EQ(entries.size(), 4u);
  std::set<std::string> jobs;
  int64_t paid = 0;
  for (const auto& e : entries) {
    jobs.insert(e.job_id);
    EXPECT_EQ(e.payer, "carol");
    EXPECT_TRUE(e.payee == "alice" || e.payee == "bob") << e.payee;
    paid += e.amount;
  }
  EXPECT_EQ(jobs.size(), 4u);
  EXPECT_EQ(ledger.balance("carol"), -paid);
  EXPECT_EQ(ledger.balance("alice") + ledger.balance("bob"), paid);
  EXPECT_TRUE(ledger.verify().ok());
}

// Runs a streamed completion while `first` is stopped after it streamed chunk 3 (killed, or
// drained), then starts a second node; returns the job as the store recorded it.
struct Interrupted {
  std::string text;
  protocol::Entry payment;
  network::JobStatus job;
};

Interrupted interrupt_mid_stream(const std::string& name, bool kill, const std::string& prompt, int max_tokens) {
  RunningCoordinator c(name);
  std::promise<void> reached;
  std::atomic<bool> release{false};
  std::unique_ptr<RunningNode> first = std::make_unique<RunningNode>(c, "alice", [&](const std::string&, int64_t index) {
    if (index != 3) return;
    reached.set_value();
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  wait_for_nodes(c, 1);
  const std::string key = c.api_key("carol");
  auto answer = std::async(std::launch::async, [&] {
    return streamed_text(c, "/v1/completions", completion(prompt, max_tokens, true), key);
  });
  EXPECT_EQ(reached.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
  if (kill)
    first->agent->kill();  // no hand-back, no more heartbeats: the lease runs out
  else
    first->agent->drain();
  release = true;
  first->thread.join();
  EXPECT_EQ(first->agent->jobs_completed(), 0);
  RunningNode second(c, "bob");
  Interrupted out;
  out.text = answer.get();
  second.stop();
  EXPECT_EQ(second.agent->jobs_completed(), 1);
  auto ledger = network::Ledger::open(c.files().ledger);
  const auto entries = ledger.entries_for("carol");
  EXPECT_EQ(entries.size(), 1u);
  EXPECT_TRUE(ledger.verify().ok());
  if (entries.empty()) return out;
  out.payment = entries[0];
  auto store = network::JobStore::open(c.files().jobs);
  out.job = store.job(out.payment.job_id);
  const auto stats = store.node_stats(first->agent->id());
  EXPECT_EQ(stats.abandoned, kill ? 1 : 0);
  EXPECT_EQ(stats.handed_back, kill ? 0 : 1);
  return out;
}

// The second node finished the job: the client's text is whole and right, and it was paid once,
// for the second attempt, to the second node's owner.
void expect_finished_elsewhere(const Interrupted& r, const GenerateResult& ref) {
  EXPECT_EQ(r.text, ref.text);
  EXPECT_EQ(r.payment.attempt, 2);
  EXPECT_EQ(r.payment.payee, "bob");
  EXPECT_EQ(r.job.attempts, 2);
  ASSERT_TRUE(r.job.usage);
  EXPECT_EQ(r.job.usage->generated_tokens, static_cast<int64_t>(ref.tokens.size()));
}

TEST(Network, AJobWhoseNodeDiesMidStreamIsResumedElsewhereAndTheClientGetsTheWholeAnswer) {
  REQUIRE_MODEL();
  const std::string prompt = "Once upon a time";
  expect_finished_elsewhere(interrupt_mid_stream("net-kill", true, prompt, 60), reference(prompt, 60));
}

TEST(Network, ADrainedNodeHandsItsJobBackAndTheNextNodeFinishesIt) {
  REQUIRE_MODEL();
  const std::string prompt = "The little dog";
  expect_finished_elsewhere(interrupt_mid_stream("net-drain", false, prompt, 50), reference(prompt, 50));
}

// The user's input as a test sets it; counts how often the agent looked.
struct FakeActivity : ActivitySource {
  std::atomic<int64_t> idle{3'600'000};
  std::atomic<int64_t> reads{0};
  std::optional<int64_t> idle_ms() override {
    ++reads;
    return idle.load();
  }
  // Waits until the agent has looked twice since now, so it has acted on the current value.
  void wait_seen() const {
    const int64_t from = reads.load();
    while (reads.load() < from + 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
};

TEST(Network, AUserReturningMidJobGetsTheMachineBackAndTheJobFinishesOnceTheyLeaveAgain) {
  REQUIRE_MODEL();
  const std::string prompt = "Once upon a time";
  const GenerateResult ref = reference(prompt, 60);
  RunningCoordinator c("net-user");
  auto user = std::make_shared<FakeActivity>();
  std::atomic<bool> returned{false};
  std::promise<void> reached;
  RunningNode node(
      c, "alice",
      [&](const std::string&, int64_t index) {
        if (index != 3 || returned.exchange(true)) return;
        user->idle = 2'000;  // someone touched the keyboard two seconds ago
        user->wait_seen();
        reached.set_value();
      },
      [&](AgentOptions& o) {
        o.lending.mode = protocol::Lending::WhenIdle;
        o.lending.max_load = 1e9;  // the load of a shared test machine must not decide
        o.lending.idle_after_ms = 60'000;
        o.activity = user;
        o.activity_check_ms = 10;
      });
  wait_for_nodes(c, 1);
  const std::string key = c.api_key("carol");
  auto answer = std::async(std::launch::async, [&] {
    return streamed_text(c, "/v1/completions", completion(prompt, 60, true), key);
  });
  ASSERT_EQ(reached.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);

  // The job comes back without penalty, and the node takes no work while the user is there.
  auto stats = [&] { return network::JobStore::open(c.files().jobs).node_stats(node.agent->id()); };
  for (int i = 0; i < 6000 && stats().handed_back == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(stats().handed_back, 1);
  EXPECT_EQ(stats().abandoned, 0);
  EXPECT_EQ(c.get("/v1/world").second["nodes"][0]["status"], "draining");
  EXPECT_EQ(stats().active_jobs, 0);

  // The user leaves: the node lends again and finishes the job after what it streamed.
  user->idle = 3'600'000;
  EXPECT_EQ(answer.get(), ref.text);
  node.stop();
  EXPECT_EQ(stats().jobs_served, 1);
  EXPECT_EQ(stats().handed_back, 1);
  EXPECT_EQ(stats().reliability, 1.0);
  auto ledger = network::Ledger::open(c.files().ledger);
  const auto entries = ledger.entries_for("alice");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].attempt, 2);
}

// A client that hangs up mid-stream cancels its job: the coordinator records it cancelled, the
// node's next chunk is refused so it stops long before max_tokens and frees itself (it runs the
// next job), and nobody pays for the cancelled one.
TEST(Network, AClientThatHangsUpCancelsItsJobAndTheNodeStopsAndFreesItself) {
  REQUIRE_MODEL();
  RunningCoordinator c("net-cancel");
  const int max_tokens = 300;
  std::promise<void> reached;
  std::atomic<bool> release{false};
  std::atomic<int64_t> last_index{-1};
  std::string cancelled_job;
  std::mutex job_mu;
  RunningNode node(c, "alice", [&](const std::string& job, int64_t index) {
    {
      std::lock_guard lock(job_mu);
      if (!cancelled_job.empty() && job != cancelled_job) return;
      cancelled_job = job;
    }
    last_index = index;
    if (index == 2) {
      reached.set_value();
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // After the cancel: slow enough that the refused chunk is heard long before max_tokens.
    if (index > 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  wait_for_nodes(c, 1);
  const std::string key = c.api_key("carol");

  // The client reads the first bytes of the stream, then hangs up.
  std::string job;
  auto client = std::async(std::launch::async, [&] {
    job = c.stream_and_hang_up("/v1/completions", completion("Once upon a time", max_tokens, true),
                               {{"Authorization", "Bearer " + key}});
  });
  ASSERT_EQ(reached.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
  client.get();
  ASSERT_FALSE(job.empty()) << "no X-Orchard-Job header";
  // The coordinator notices the hang-up at its next write to the client (a chunk or a ping).
  std::string state;
  for (int i = 0; i < 3000 && state != "cancelled"; ++i) {
    state = c.get("/v1/jobs/" + job, key).second.value("state", "");
    if (state != "cancelled") std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(state, "cancelled");
  // Another client cannot see the job.
  EXPECT_EQ(c.get("/v1/jobs/" + job, c.api_key("mallory")).first, 404);
  release = true;

  // The node stopped and is free: the next job runs on it to the end.
  const auto [status, next] = c.post("/v1/completions", completion("The little dog", 8, false), key);
  ASSERT_EQ(status, 200) << next;
  EXPECT_EQ(next["choices"][0]["text"], reference("The little dog", 8).text);
  EXPECT_LT(last_index.load(), max_tokens - 1) << "the node generated the cancelled job to the end";
  node.stop();
  EXPECT_EQ(node.agent->jobs_completed(), 1);
  auto store = network::JobStore::open(c.files().jobs);
  const network::JobStatus st = store.job(job);
  EXPECT_EQ(st.state, network::JobState::Cancelled);
  EXPECT_FALSE(st.usage);
  EXPECT_LT(st.output.size(), static_cast<size_t>(max_tokens));
  auto ledger = network::Ledger::open(c.files().ledger);
  const auto entries = ledger.entries_for("carol");
  ASSERT_EQ(entries.size(), 1u) << "the cancelled job was paid";
  EXPECT_NE(entries[0].job_id, job);
  EXPECT_TRUE(ledger.verify().ok());
}

TEST(PrepareJob, ResumesAfterTheStreamedTokensWithWhatIsLeftOfMaxTokens) {
  REQUIRE_MODEL();
  const ServedModel m = load_served_model(model_path(), "", 1, 0);
  EXPECT_EQ(m.name, "stories260K");
  protocol::Work w;
  w.job_id = "job-1";
  w.max_tokens = 10;
  w.request = {{"api", "completions"}, {"body", {{"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 0}}}};
  const PreparedJob fresh = prepare_job(w, m);
  const auto prompt = m.engine->tokenizer().encode("Once upon a time", true, false);
  EXPECT_EQ(fresh.tokens, prompt);
  EXPECT_EQ(fresh.options.max_tokens, 10);
  EXPECT_EQ(fresh.options.sampling.temperature, 0);
  EXPECT_EQ(fresh.next_index, 0);

  w.output = {",", " there"};
  w.output_tokens = {{29892}, {727, 5}};
  const PreparedJob resumed = prepare_job(w, m);
  auto expected = prompt;
  expected.insert(expected.end(), {29892, 727, 5});
  EXPECT_EQ(resumed.tokens, expected);
  EXPECT_EQ(resumed.prompt_tokens, prompt.size());
  EXPECT_EQ(resumed.generated_before, 3);
  EXPECT_EQ(resumed.options.max_tokens, 7);
  EXPECT_EQ(resumed.next_index, 2);

  // Chat goes through the model's template, as `orchard serve` builds it.
  w = {};
  w.max_tokens = 5;
  w.request = {{"api", "chat"}, {"body", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}}}};
  GenerateOptions g;
  EXPECT_EQ(prepare_job(w, m).tokens,
            serve::chat_prompt_tokens(m.chat, m.engine->tokenizer(), {{"user", "Hi"}}, g));

  w.request = {{"api", "completions"}, {"body", {{"prompt", std::string(20'000, 'x')}}}};
  try {
    prepare_job(w, m);
    ADD_FAILURE() << "a prompt longer than the context was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit the context"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace orchard::node
