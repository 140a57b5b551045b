#pragma once
// The channel between one request's HTTP handler and the scheduler: the scheduler pushes text
// as it is generated and finally the completion; the handler waits for either, with a timeout
// so it can notice a client that went away, and may cancel.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "model/tokenizer/tokenizer.h"

namespace orchard::serve {

// A generated token's log-probability under the model (log-softmax of its logits, before
// temperature, penalties or cuts) and the most likely alternatives', as OpenAI reports them.
struct TokenLogprob {
  std::string piece;  // the token's text (bytes; may be part of a UTF-8 character)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // most likely first
};

struct Completion {
  std::string text;
  std::vector<TokenId> tokens;
  std::string finish_reason;   // "stop", "length", "cancelled", "error"
  std::string error;           // set when finish_reason == "error"
  std::string stopped_by;      // the stop string that ended it, if one did
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;   // of prompt_tokens, those whose keys and values a slot already held
  int64_t completion_tokens = 0;
  std::vector<TokenLogprob> logprobs;  // one per generated token, when asked
  double queue_ms = 0;         // waiting for a slot
  double ttft_ms = 0;          // from submission to the first generated token
  double gen_ms = 0;           // from the first generated token to the end
};

class Stream {
 public:
  enum class Got { Text, Done, Timeout };

  // Handler side. Moves all text pushed so far into `text` (Text), or reports the end once all
  // text has been taken (Done), or nothing happened within `timeout`.
  // With a pace set, text comes out no sooner than the pace after the previous text (the end is
  // never held back); while it waits out the pace the handler does not count as a waiter, so
  // the scheduler leaves it asleep and several tokens go out in one write.
  Got wait(std::string& text, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (pace_.count() > 0 && !done_) cv_.wait_until(lock, last_text_ + pace_, [&] { return done_; });
    ++waiters_;
    cv_.wait_for(lock, timeout, [&] { return !pending_.empty() || done_; });
    --waiters_;
    if (!pending_.empty()) {
      text.swap(pending_);
      pending_.clear();
      if (pace_.count() > 0) last_text_ = std::chrono::steady_clock::now();
      return Got::Text;
    }
    return done_ ? Got::Done : Got::Timeout;
  }
  // Blocks until the end; returns the completion (its text is the whole output).
  const Completion& wait_done() {
    std::unique_lock lock(mu_);
    ++waiters_;
    cv_.wait(lock, [&] { return done_; });
    --waiters_;
    return completion_;
  }
  // Asks the scheduler to stop this request and free its slot at the next step.
  void cancel() { cancelled_.store(true, std::memory_order_release); }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  bool done() const {
    std::lock_guard lock(mu_);
    return done_;
  }
  // Valid once wait() returned Done or wait_done() returned.
  const Completion& completion() const { return completion_; }

  // Scheduler side.
  // The least time between two texts wait() gives out (0: each as soon as it comes). Set before
  // the stream is handed out.
  void set_pace(std::chrono::microseconds pace) { pace_ = pace; }
  void push(const std::string& text) {
    if (append(text)) wake();
  }
  // push() in two halves, so a busy thread can leave the waking to another: appends the text
  // and says whether the handler is asleep waiting for it (then someone must call wake()).
  bool append(const std::string& text) {
    if (text.empty()) return false;
    std::lock_guard lock(mu_);
    pending_ += text;
    return waiters_ > 0;
  }
  void wake() { cv_.notify_all(); }
  // A generated token's log-probabilities, for the handler to send with the text (take_logprobs).
  void append_logprob(TokenLogprob t) {
    std::lock_guard lock(mu_);
    logprobs_.push_back(std::move(t));
  }
  // Handler side: the entries appended since the last call.
  std::vector<TokenLogprob> take_logprobs() {
    std::lock_guard lock(mu_);
    std::vector<TokenLogprob> out;
    out.swap(logprobs_);
    return out;
  }
  // Whether a handler is inside wait() or wait_done() now.
  bool has_waiter() const {
    std::lock_guard lock(mu_);
    return waiters_ > 0;
  }
  void finish(Completion c) {
    {
      std::lock_guard lock(mu_);
      completion_ = std::move(c);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  int waiters_ = 0;  // handler threads inside wait() / wait_done()
  std::chrono::microseconds pace_{0};
  std::chrono::steady_clock::time_point last_text_{};  // when wait() last gave out text
  bool done_ = false;
  Completion completion_;
  std::vector<TokenLogprob> logprobs_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace orchard::serve
