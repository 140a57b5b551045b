// The prompt cache: a request starts from the longest prefix of its prompt that a slot still
// holds (its conversation's earlier turns, or a system prompt another request brought), and
// answers exactly what it answers computed from scratch — the served model is batch-invariant,
// so keys and values computed in one step or another are the same bits.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "model/synthetic/synthetic.h"
#include "serve/scheduler.h"

namespace orchard::serve {
namespace {

struct Served {
  std::unique_ptr<Engine> engine;
  LocalExecutor exec;
  Metrics metrics;
  Scheduler sched;

  static std::unique_ptr<Engine> load() {
    const auto path = std::filesystem::path(::testing::TempDir()) / "prompt-cache-tiny.gguf";
    if (!std::filesystem::exists(path)) write_synthetic_model(model_shape("tiny"), DType::Q8_0, 7, path.string());
    EngineOptions o;
    o.model_path = path.string();
    o.threads = 2;
    o.n_ctx = 512;
    return Engine::load(o);
  }
  Served(int slots, bool cache) : engine(load()), exec(*engine, slots), sched(exec, engine->tokenizer(), metrics, options(cache)) {}
  static SchedulerOptions options(bool cache) {
    SchedulerOptions o;
    o.prompt_cache = cache;
    o.max_step_tokens = 16;  // prompts in several pieces, as long ones arrive
    return o;
  }
  std::vector<TokenId> encode(const std::string& text) const { return engine->tokenizer().encode(text, true, false); }
  uint64_t counter(const std::string& name) const {
    std::smatch m;
    const std::string text = metrics.render();
    if (!std::regex_search(text, m, std::regex("\n" + name + " ([0-9]+)"))) return ~uint64_t{0};
    return std::stoull(m[1]);
  }
};

GenerateOptions greedy(int n) {
  GenerateOptions g;
  g.max_tokens = n;
  g.sampling = SamplerOptions::greedy();
  return g;
}

std::vector<TokenId> cat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(PromptCache, AConversationsNextTurnStartsFromItsHistoryAndAnswersTheSame) {
  Served s(2, true);
  const auto turn1 = s.encode("the history of the quick brown fox who jumped over the lazy dog, told at length");
  const auto stream_a = s.sched.submit({turn1, greedy(12)});
  const Completion& a = stream_a->wait_done();
  ASSERT_EQ(a.completion_tokens, 12);
  EXPECT_EQ(a.cached_tokens, 0);
  // Turn 2: the history (prompt and reply) and a new question.
  const auto turn2 = cat(cat(turn1, a.tokens), s.engine->tokenizer().encode(" and then what happened?", false, false));
  const auto stream_b = s.sched.submit({turn2, greedy(12)});
  const Completion& b = stream_b->wait_done();
  // The slot held the first prompt and every reply token but the last (sampled, never fed).
  EXPECT_EQ(b.cached_tokens, static_cast<int64_t>(turn1.size() + a.tokens.size() - 1));
  const GenerateResult alone = s.engine->generate_tokens(turn2, greedy(12));
  EXPECT_EQ(b.tokens, alone.tokens);
  EXPECT_EQ(s.counter("orchard_prompt_tokens_cached_total"), static_cast<uint64_t>(b.cached_tokens));
  EXPECT_EQ(s.counter("orchard_prompt_tokens_computed_total"),
            static_cast<uint64_t>(turn1.size() + turn2.size()) - static_cast<uint64_t>(b.cached_tokens));
  // The same prompt again keeps all of it but the last token, whose logits the step must make.
  const auto stream_c = s.sched.submit({turn2, greedy(12)});
  const Completion& c = stream_c->wait_done();
  EXPECT_EQ(c.cached_tokens, static_cast<int64_t>(turn2.size()) - 1);
  EXPECT_EQ(c.tokens, alone.tokens);
}

TEST(PromptCache, ASystemPromptHeldByABusySlotIsCopiedIntoAFreeOne) {
  Served s(2, true);
  const auto system = s.encode("you are a helpful assistant who answers in short sentences about foxes, dogs and cats");
  const auto tail_a = s.engine->tokenizer().encode(" tell me about foxes", false, false);
  const auto tail_b = s.engine->tokenizer().encode(" what do cats eat", false, false);
  // A generates for a long time in one slot; B arrives meanwhile and gets the other, empty one.
  auto a = s.sched.submit({cat(system, tail_a), greedy(100000)});
  std::string piece;
  ASSERT_EQ(a->wait(piece, std::chrono::seconds(60)), Stream::Got::Text);
  const auto prompt_b = cat(system, tail_b);
  const auto stream_b = s.sched.submit({prompt_b, greedy(16)});
  const Completion& b = stream_b->wait_done();
  size_t shared = 0;
  while (shared < tail_a.size() && shared < tail_b.size() && tail_a[shared] == tail_b[shared]) ++shared;
  EXPECT_EQ(b.cached_tokens, static_cast<int64_t>(system.size() + shared));
  a->cancel();
  EXPECT_EQ(a->wait_done().finish_reason, "cancelled");
  EXPECT_EQ(b.tokens, s.engine->generate_tokens(prompt_b, greedy(16)).tokens);
}

TEST(PromptCache, SixteenClientsWithOneSystemPromptComputeItOnce) {
  Served s(4, true);
  std::string long_text;
  for (int i = 0; i < 12; ++i) long_text += "you are a helpful assistant who answers briefly and kindly. ";
  const auto system = s.encode(long_text);
  ASSERT_GT(system.size(), 100u);
  std::vector<std::vector<TokenId>> prompts;
  std::vector<GenerateResult> alone;  // first: the engine is the scheduler's once requests run
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(cat(system, s.engine->tokenizer().encode(" question number " + std::to_string(i) + " is here", false, false)));
    alone.push_back(s.engine->generate_tokens(prompts.back(), greedy(6)));
  }
  std::vector<std::shared_ptr<Stream>> streams;
  for (const auto& p : prompts) streams.push_back(s.sched.submit({p, greedy(6)}));
  int64_t computed = 0;
  int from_scratch = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    const Completion& c = streams[i]->wait_done();
    computed += c.prompt_tokens - c.cached_tokens;
    if (c.cached_tokens < static_cast<int64_t>(system.size())) ++from_scratch;
    EXPECT_EQ(c.tokens, alone[i].tokens) << "request " << i;
  }
  EXPECT_EQ(from_scratch, 1) << "the system prompt was computed by more than one request";
  EXPECT_LT(computed, static_cast<int64_t>(2 * system.size()));
  EXPECT_EQ(s.counter("orchard_prompt_tokens_computed_total"), static_cast<uint64_t>(computed));
}

TEST(PromptCache, OffEveryPromptIsComputedWhole) {
  Served s(1, false);
  const auto p = s.encode("once upon a time there was a fox");
  const auto stream_a = s.sched.submit({p, greedy(8)});
  const Completion& a = stream_a->wait_done();
  const auto stream_b = s.sched.submit({p, greedy(8)});
  const Completion& b = stream_b->wait_done();
  EXPECT_EQ(b.cached_tokens, 0);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(s.counter("orchard_prompt_tokens_cached_total"), 0u);
  EXPECT_EQ(s.counter("orchard_prompt_tokens_computed_total"), 2 * p.size());
}

}  // namespace
}  // namespace orchard::serve
