// `orchard serve` as a 2-rank job (orchard run --serve): rank 0 serves, both ranks follow its
// steps, and the answers equal one machine's — also for requests that run at the same time.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/engine.h"
#include "test_data.h"

namespace orchard::serve {
namespace {

using nlohmann::json;

// Starts `orchard run … --serve` with stderr to a file; returns its pid and the port it printed.
std::pair<pid_t, int> start(const std::string& kind, const std::string& model, const std::string& log) {
  std::remove(log.c_str());  // a previous run's log must not be mistaken for this one's
  const pid_t pid = fork();
  if (pid == 0) {
    freopen(log.c_str(), "w", stderr);
    freopen("/dev/null", "w", stdout);
    const std::string bin = test::orchard_binary();
    execl(bin.c_str(), bin.c_str(), "run", "--nodes", "2", "--serve", "--parallel", kind.c_str(), "-m", model.c_str(),
          "--port", "0", "--slots", "3", "-t", "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string listening = "on http://127.0.0.1:";
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(log);
    if (!in) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The whole line (the port and the space after it), not a half-written one.
    if (const size_t at = text.find(listening); at != std::string::npos) {
      const size_t digits = at + listening.size(), end = text.find_first_not_of("0123456789", digits);
      if (end != std::string::npos && end > digits && text[end] == ' ')
        return {pid, std::stoi(text.substr(digits, end - digits))};
    }
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return {-1, 0};
}

class ClusterServe : public ::testing::TestWithParam<std::string> {};

TEST_P(ClusterServe, AnswersEqualOneMachineAndStopsCleanly) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const std::string model = test::data_file("models/stories260K.gguf").string();
  EngineOptions eo;
  eo.model_path = model;
  eo.threads = 1;
  auto engine = Engine::load(eo);
  const std::vector<std::string> prompts = {"", "Once upon a time", "The dog was", "Lily and Tom"};
  std::vector<std::string> want;
  for (const auto& p : prompts) {
    GenerateOptions g;
    g.max_tokens = 24;
    g.sampling = SamplerOptions::greedy();
    want.push_back(engine->generate(p, g).text);
  }

  const std::string log = ::testing::TempDir() + "cluster-serve-" + GetParam() + ".log";
  auto [pid, port] = start(GetParam(), model, log);
  ASSERT_GT(pid, 0) << "the job did not start listening; its log: " << log;
  // Four requests at once on three slots: every step of all of them goes through both ranks.
  std::vector<std::string> got(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i, port = port] {  // (clang 14 cannot capture a structured binding)
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(120, 0);
      auto res = c.Post("/v1/completions", json{{"prompt", prompts[i]}, {"max_tokens", 24}, {"temperature", 0}}.dump(),
                        "application/json");
      if (res && res->status == 200) got[i] = json::parse(res->body)["choices"][0]["text"];
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], want[i]) << "prompt '" << prompts[i] << "'";

  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  // The prompt cache over the ranks: the same prompts again start from what the slots hold
  // (every rank keeps or copies the same prefix) and answer the same.
  int64_t cached = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto again = c.Post("/v1/completions", json{{"prompt", prompts[i]}, {"max_tokens", 24}, {"temperature", 0}}.dump(),
                        "application/json");
    ASSERT_TRUE(again && again->status == 200);
    const json r = json::parse(again->body);
    EXPECT_EQ(r["choices"][0]["text"], want[i]) << "prompt '" << prompts[i] << "' from the cache";
    cached += r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  }
  EXPECT_GT(cached, 0) << "no request found its prompt in a slot";

  auto res = c.Get("/api/cluster");
  ASSERT_TRUE(res);
  json view = json::parse(res->body);
  EXPECT_EQ(view["kind"], GetParam());
  ASSERT_EQ(view["ranks"].size(), 2u);
  EXPECT_TRUE(view["ranks"][1]["link_latency_us"].is_number());

  // Ctrl-C: rank 0 stops serving and releases the follower, nobody is killed, and the job
  // reports the interruption the usual way (128 + SIGINT).
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << "status " << status << "; log: " << log;
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("orchard serve: stopped"), std::string::npos) << text;
  EXPECT_EQ(text.find("killed by signal"), std::string::npos) << text;
}

INSTANTIATE_TEST_SUITE_P(Kinds, ClusterServe, ::testing::Values("pipeline", "tensor"));

}  // namespace
}  // namespace orchard::serve
