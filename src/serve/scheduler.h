#pragma once
// Continuous batching. Requests wait in a bounded queue for a free KV slot; every step feeds
// each running request either its next generated token or its next piece of prompt, all in one
// executor step, so new requests join and finished ones leave between any two tokens. One
// thread runs the steps, which is also what gives a cluster one global order of work.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "model/engine.h"
#include "model/grammar/grammar_mask.h"
#include "model/text_output.h"
#include "serve/executor.h"
#include "serve/metrics.h"
#include "serve/stream.h"
#include "serve/stream_waker.h"

namespace orchard::serve {

struct SchedulerOptions {
  int max_queue = 64;               // requests waiting for a slot before new ones are refused
  int64_t max_step_tokens = 256;    // prompt tokens fed per step, shared by the new requests
  // > 0: while some requests generate, a step that also feeds prompts is sized to take about
  // this many milliseconds (from the measured cost of a prompt token and of a generating step),
  // so running streams keep flowing while a long prompt goes in; 0: max_step_tokens alone.
  // 400 ms (docs/serving.md): on `1b` Q4_0 at 2 threads a 4,000-token prompt then stalls four
  // streams for at most ~0.5 s a token instead of ~1.8 s, and reaches its first token 1.1× later.
  double step_ms = 400;
  // Least time between two writes to one stream (0: every token at once). A few milliseconds
  // put several tokens in one write when tokens come faster than readers can see them, which
  // saves the wakes, system calls and parsing that otherwise cost each token.
  std::chrono::microseconds stream_interval{0};
  // The prompt cache: a request starts from the longest prefix of its prompt that a slot still
  // holds from an earlier request (its own earlier turns, a shared system prompt), copied from
  // another slot when a free one holds less.
  bool prompt_cache = true;
};

// Why a request was refused before it started; the HTTP layer maps it to a status code.
class Refused : public Error {
 public:
  enum class Why { QueueFull, TooLong, ShuttingDown, BadRequest };
  Refused(Why why, const std::string& msg) : Error(msg), why_(why) {}
  Why why() const { return why_; }

 private:
  Why why_;
};

struct Request {
  std::vector<TokenId> prompt;
  GenerateOptions options;
};

class Scheduler {
 public:
  Scheduler(Executor& executor, const Tokenizer& tok, Metrics& metrics, SchedulerOptions options = {});
  ~Scheduler();  // stops: running requests finish as cancelled

  // Queues a request; throws Refused when it cannot be taken.
  std::shared_ptr<Stream> submit(Request request);
  void stop();

  int slots() const { return executor_.slots(); }
  int64_t slot_capacity() const { return executor_.slot_capacity(); }
  int waiting() const;
  int active() const;

 private:
  struct Job;
  void loop();
  bool admit_and_collect(std::vector<std::shared_ptr<Job>>& running);
  void sample(Job& job, const float* logits);
  TokenLogprob token_logprob(const float* logits, int64_t n_vocab, TokenId t, int32_t top) const;
  const float* grammar_mask(Job& job, const float* logits);
  void finish(Job& job, const std::string& reason, const std::string& error = {});
  void release_finished();
  void place(Job& job, std::vector<bool>& restarted);
  bool waits_for_prefix(const Job& job, const std::vector<bool>& restarted) const;

  Executor& executor_;
  const Tokenizer& tok_;
  Metrics& metrics_;
  SchedulerOptions opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> slot_jobs_;   // per slot: the job in it, or null
  // Per slot, the scheduler thread's: the tokens whose keys and values it holds, in order, and
  // when it last took a request (the least recently used free slot is the one overwritten).
  std::vector<std::vector<TokenId>> held_;
  std::vector<uint64_t> last_used_;
  // Made at the first constrained request.
  std::optional<VocabPieces> vocab_;
  // Each grammar over the vocabulary, shared by the requests that use it; the last few stay
  // alive between requests (agents send the same schema every time).
  std::shared_ptr<GrammarVocab> grammar_vocab(const std::shared_ptr<const Grammar>& grammar);
  std::vector<std::pair<const Grammar*, std::weak_ptr<GrammarVocab>>> grammar_vocabs_;
  std::deque<std::shared_ptr<GrammarVocab>> recent_grammar_vocabs_;
  uint64_t placements_ = 0;
  // Measured, for step_ms: a step with only generating requests, and each prompt token more (ms).
  double generating_step_ms_ = 0, prompt_token_ms_ = 0;
  bool stopping_ = false;
  StreamWaker waker_;
  std::vector<std::shared_ptr<Stream>> to_wake_;  // the scheduler thread's, per step
  std::thread thread_;
};

}  // namespace orchard::serve
