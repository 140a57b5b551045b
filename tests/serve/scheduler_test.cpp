// The scheduler against the engine it batches: every request gets what it would get alone,
// and the queue, cancellation and limits behave.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "model/synthetic/synthetic.h"
#include "serve/scheduler.h"
#include "test_data.h"

namespace orchard::serve {
namespace {

std::string tiny_model_path() {
  const auto path = std::filesystem::path(::testing::TempDir()) / "scheduler-tiny.gguf";
  if (!std::filesystem::exists(path)) write_synthetic_model(model_shape("tiny"), DType::Q8_0, 5, path.string());
  return path.string();
}

// The executor makes the model batch-invariant, so a batch's rows get the bits they get alone,
// with repacked weights or without. Synthetic models, whose logits nearly tie, would show any
// difference within a few tokens.
std::unique_ptr<Engine> load(const std::string& path, int64_t ctx = 256, bool repack = true) {
  EngineOptions o;
  o.model_path = path;
  o.threads = 2;
  o.n_ctx = ctx;
  o.repack = repack;
  return Engine::load(o);
}

GenerateOptions greedy_for(int n) {
  GenerateOptions g;
  g.max_tokens = n;
  g.sampling = SamplerOptions::greedy();
  return g;
}

struct Fixture {
  std::unique_ptr<Engine> engine;
  LocalExecutor exec;
  Metrics metrics;
  Scheduler sched;
  Fixture(std::unique_ptr<Engine> e, int slots, SchedulerOptions o = {})
      : engine(std::move(e)), exec(*engine, slots), sched(exec, engine->tokenizer(), metrics, o) {}
};

class ConcurrentRequests : public ::testing::TestWithParam<int> {};

// The synthetic model repacked and not, and the golden stories260K.
TEST_P(ConcurrentRequests, GetWhatTheyGetAlone) {
  const int which = GetParam();
  if (which == 2) ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  Fixture f(which == 2 ? load(test::data_file("models/stories260K.gguf").string())
                       : load(tiny_model_path(), 256, which == 0),
            4);
  // The reference: the same engine, alone (its model is batch-invariant now, as served).
  const std::vector<std::string> prompts = {"once upon a time", "the cat sat", "a", "red green blue yellow",
                                            "it was a dark and stormy night", "hello"};
  std::vector<GenerateResult> alone;
  for (const auto& p : prompts) alone.push_back(f.engine->generate(p, greedy_for(24)));
  // Six requests on four slots: two wait, and all of them share steps with the others.
  std::vector<std::shared_ptr<Stream>> streams;
  for (const auto& p : prompts)
    streams.push_back(f.sched.submit({f.engine->tokenizer().encode(p, true, false), greedy_for(24)}));
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string streamed, piece;
    for (;;) {
      auto got = streams[i]->wait(piece, std::chrono::milliseconds(5000));
      ASSERT_NE(got, Stream::Got::Timeout) << "request " << i << " stalled";
      if (got == Stream::Got::Done) break;
      streamed += piece;
    }
    const Completion& c = streams[i]->completion();
    EXPECT_EQ(c.tokens, alone[i].tokens) << "request " << i << " (" << prompts[i] << ")";
    EXPECT_EQ(c.text, alone[i].text);
    EXPECT_EQ(streamed, c.text) << "the streamed pieces make up the text";
    EXPECT_EQ(c.finish_reason, alone[i].finish_reason);
    EXPECT_EQ(c.prompt_tokens, static_cast<int64_t>(alone[i].prompt_tokens.size()));
    EXPECT_EQ(c.completion_tokens, static_cast<int64_t>(alone[i].tokens.size()));
  }
  EXPECT_EQ(f.sched.active(), 0);
  EXPECT_EQ(f.sched.waiting(), 0);
}

INSTANTIATE_TEST_SUITE_P(Scheduler, ConcurrentRequests, ::testing::Values(0, 1, 2), [](const auto& info) {
  return std::string(info.param == 0 ? "SyntheticRepacked" : info.param == 1 ? "SyntheticPlain" : "Stories260K");
});

TEST(Scheduler, LongPromptsArriveInPiecesWithoutChangingTheResult) {
  SchedulerOptions o;
  o.max_step_tokens = 3;  // every prompt needs several steps
  Fixture f(load(tiny_model_path()), 2, o);
  const std::string p = "the quick brown fox jumps over the lazy dog and runs far away";
  auto ref = f.engine->generate(p, greedy_for(10));
  auto s = f.sched.submit({f.engine->tokenizer().encode(p, true, false), greedy_for(10)});
  const Completion& c = s->wait_done();
  EXPECT_EQ(c.tokens, ref.tokens);
}

TEST(Scheduler, StopStringsEndTheRequestAndAreNotShown) {
  Fixture f(load(tiny_model_path()), 2);
  auto ref = f.engine->generate("once upon a time", greedy_for(24));
  ASSERT_GT(ref.text.size(), 6u);
  const std::string stop = ref.text.substr(ref.text.size() / 2, 3);
  auto opts = greedy_for(24);
  opts.stop = {stop};
  auto s = f.sched.submit({f.engine->tokenizer().encode("once upon a time", true, false), opts});
  const Completion& c = s->wait_done();
  EXPECT_EQ(c.finish_reason, "stop");
  EXPECT_EQ(c.text, ref.text.substr(0, ref.text.find(stop)));
}

TEST(Scheduler, FullQueueIsRefusedAndCancelledRequestsFreeTheirSlots) {
  SchedulerOptions o;
  o.max_queue = 2;
  Fixture f(load(tiny_model_path()), 1, o);
  const auto prompt = f.engine->tokenizer().encode("hello there", true, false);
  auto running = f.sched.submit({prompt, greedy_for(100000)});
  // Wait until it holds the slot, so the next two fill the queue.
  std::string piece;
  ASSERT_EQ(running->wait(piece, std::chrono::milliseconds(10000)), Stream::Got::Text);
  auto q1 = f.sched.submit({prompt, greedy_for(4)});
  auto q2 = f.sched.submit({prompt, greedy_for(4)});
  try {
    f.sched.submit({prompt, greedy_for(4)});
    FAIL() << "a third waiting request should be refused";
  } catch (const Refused& e) {
    EXPECT_EQ(e.why(), Refused::Why::QueueFull);
    EXPECT_NE(std::string(e.what()).find("queue is full"), std::string::npos);
  }
  q1->cancel();         // cancelled while waiting: never takes the slot
  running->cancel();    // cancelled while generating: its slot goes to q2
  EXPECT_EQ(running->wait_done().finish_reason, "cancelled");
  EXPECT_EQ(q1->wait_done().finish_reason, "cancelled");
  EXPECT_TRUE(q1->completion().tokens.empty());
  const Completion& c = q2->wait_done();
  EXPECT_EQ(c.finish_reason, "length");
  EXPECT_EQ(c.completion_tokens, 4);
  EXPECT_EQ(f.sched.active(), 0);
}

TEST(Scheduler, PromptsTooLongOrEmptyAreRefused) {
  Fixture f(load(tiny_model_path(), 16), 1);
  std::vector<TokenId> long_prompt(16, 5);
  try {
    f.sched.submit({long_prompt, greedy_for(4)});
    FAIL();
  } catch (const Refused& e) {
    EXPECT_EQ(e.why(), Refused::Why::TooLong);
  }
  EXPECT_THROW(f.sched.submit({{}, greedy_for(4)}), Refused);
  EXPECT_THROW(f.sched.submit({{1, 2}, greedy_for(0)}), Refused);
  EXPECT_THROW(f.sched.submit({{1, 1 << 30}, greedy_for(4)}), Refused);
  // A reply that reaches the end of the slot stops with "length".
  auto s = f.sched.submit({std::vector<TokenId>(12, 5), greedy_for(100)});
  const Completion& c = s->wait_done();
  EXPECT_EQ(c.finish_reason, "length");
  EXPECT_EQ(c.completion_tokens, 16 - 12 + 1) << "the last token is returned, never fed";
}

TEST(Scheduler, StoppingCancelsEverything) {
  auto f = std::make_unique<Fixture>(load(tiny_model_path()), 1);
  const auto prompt = f->engine->tokenizer().encode("hello", true, false);
  auto a = f->sched.submit({prompt, greedy_for(1000000)});
  auto b = f->sched.submit({prompt, greedy_for(4)});
  f->sched.stop();
  EXPECT_EQ(a->wait_done().finish_reason, "cancelled");
  EXPECT_EQ(b->wait_done().finish_reason, "cancelled");
  EXPECT_THROW(f->sched.submit({prompt, greedy_for(4)}), Refused);
}

}  // namespace
}  // namespace orchard::serve

namespace orchard::serve {
namespace {

// append() says whether a handler sleeps waiting for text; the waker's thread then wakes it.
TEST(StreamWaker, WakesAHandlerWaitingForText) {
  auto s = std::make_shared<Stream>();
  EXPECT_FALSE(s->append("early"));  // nobody waits yet: no wake needed
  std::string got;
  ASSERT_EQ(s->wait(got, std::chrono::milliseconds(0)), Stream::Got::Text);
  EXPECT_EQ(got, "early");

  StreamWaker waker;
  std::string text;
  Stream::Got result = Stream::Got::Timeout;
  std::thread handler([&] {
    result = s->wait(text, std::chrono::seconds(30));
  });
  while (!s->has_waiter()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(s->append("x"));  // the handler sleeps: it needs a wake, and nothing else gives one
  std::vector<std::shared_ptr<Stream>> batch{s};
  waker.wake(batch);
  EXPECT_TRUE(batch.empty());
  handler.join();
  EXPECT_EQ(result, Stream::Got::Text);
  EXPECT_EQ(text, "x");
}

// A paced stream gives text out no sooner than the pace after its previous text, all that came
// meanwhile in one piece; the end is never held back.
TEST(Stream, PaceJoinsTextsAndNeverHoldsBackTheEnd) {
  using namespace std::chrono;
  auto s = std::make_shared<Stream>();
  const auto pace = milliseconds(60);
  s->set_pace(pace);
  std::string got;
  s->append("a");
  ASSERT_EQ(s->wait(got, milliseconds(0)), Stream::Got::Text);  // the first text at once
  const auto first = steady_clock::now();
  EXPECT_EQ(got, "a");
  s->append("b");
  s->append("c");
  ASSERT_EQ(s->wait(got, seconds(30)), Stream::Got::Text);
  EXPECT_GE(steady_clock::now() - first, pace);
  EXPECT_EQ(got, "bc");

  auto slow = std::make_shared<Stream>();
  slow->set_pace(seconds(600));
  slow->append("x");
  ASSERT_EQ(slow->wait(got, milliseconds(0)), Stream::Got::Text);
  std::thread finisher([&] {
    std::this_thread::sleep_for(milliseconds(20));
    slow->finish(Completion{});
  });
  const auto t0 = steady_clock::now();
  EXPECT_EQ(slow->wait(got, seconds(600)), Stream::Got::Done);
  EXPECT_LT(steady_clock::now() - t0, seconds(300));  // not the ten-minute pace
  finisher.join();
}

// Through the scheduler: with an interval, every request still gets exactly its text.
TEST(Scheduler, StreamIntervalKeepsEveryTextWhole) {
  SchedulerOptions so;
  so.stream_interval = std::chrono::milliseconds(5);
  Fixture f(load(tiny_model_path()), 2, so);
  const GenerateResult alone = f.engine->generate("the cat sat", greedy_for(32));
  auto stream = f.sched.submit({f.engine->tokenizer().encode("the cat sat", true, false), greedy_for(32)});
  std::string streamed, piece;
  int pieces = 0;
  for (;;) {
    auto got = stream->wait(piece, std::chrono::milliseconds(5000));
    ASSERT_NE(got, Stream::Got::Timeout);
    if (got == Stream::Got::Done) break;
    streamed += piece;
    ++pieces;
  }
  EXPECT_EQ(streamed, alone.text);
  EXPECT_EQ(stream->completion().tokens, alone.tokens);
  EXPECT_GE(pieces, 1);
}

}  // namespace
}  // namespace orchard::serve

namespace orchard::serve {
namespace {

// Records each step's feeds: (slot, tokens).
class RecordingExecutor : public LocalExecutor {
 public:
  using LocalExecutor::LocalExecutor;
  void step(std::span<const SlotFeed> feeds, std::vector<float>& logits) override {
    auto& step = steps.emplace_back();
    for (const SlotFeed& f : feeds) step.emplace_back(f.slot, f.tokens.size());
    LocalExecutor::step(feeds, logits);
  }
  std::vector<std::vector<std::pair<int, size_t>>> steps;
};

// With a step time far below what any step takes, a long prompt arriving while another request
// generates goes in one token per step (the floor), and both answers stay what they are alone.
TEST(Scheduler, StepTimeKeepsPromptPiecesSmallWhileOthersGenerate) {
  auto engine = load(tiny_model_path());
  RecordingExecutor exec(*engine, 2);
  Metrics metrics;
  SchedulerOptions o;
  o.step_ms = 0.001;
  Scheduler sched(exec, engine->tokenizer(), metrics, o);
  std::string long_prompt;
  for (int i = 0; i < 20; ++i) long_prompt += "the cat sat on the mat ";
  const auto ref_short = engine->generate("once upon a time", greedy_for(200));
  const auto ref_long = engine->generate(long_prompt, greedy_for(4));
  auto first = sched.submit({engine->tokenizer().encode("once upon a time", true, false), greedy_for(200)});
  std::string piece;
  ASSERT_EQ(first->wait(piece, std::chrono::milliseconds(5000)), Stream::Got::Text);  // generating now
  auto second = sched.submit({engine->tokenizer().encode(long_prompt, true, false), greedy_for(4)});
  EXPECT_EQ(second->wait_done().tokens, ref_long.tokens);
  EXPECT_EQ(first->wait_done().tokens, ref_short.tokens);
  // Steps feeding both: the first request's generated token and a piece of the second's prompt
  // (the first request's own prompt step measured what a prompt token costs).
  const int first_slot = exec.steps.at(0).at(0).first;
  size_t mixed = 0;
  for (const auto& step : exec.steps) {
    if (step.size() != 2) continue;
    ++mixed;
    for (const auto& [slot, tokens] : step) EXPECT_EQ(tokens, 1u) << (slot == first_slot ? "generating" : "prompt piece");
  }
  EXPECT_GT(mixed, 100u);  // the long prompt went in a token a step
}

}  // namespace
}  // namespace orchard::serve
