#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>

#include "tensor/error.h"

namespace orchard::serve {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

struct Scheduler::Job {
  Request req;
  std::shared_ptr<Stream> stream;
  Sampler sampler;
  TextOutput out;
  int slot = -1;
  size_t fed = 0;                   // prompt tokens already in the slot
  bool fresh = true;                // the slot must be cleared before the first feed
  TokenId next = -1;                // generated token to feed at the next step
  std::vector<TokenId> generated;
  Clock::time_point submitted = Clock::now(), started, first_token, last_token;
  int64_t positions = 0;            // slot positions after the feeds so far
  bool done = false;
  Completion result;                // filled when done; published once the slot is free

  Job(Request r, std::shared_ptr<Stream> s)
      : req(std::move(r)), stream(std::move(s)), sampler(req.options.sampling), out(req.options.stop) {}
  bool prefilling() const { return fed < req.prompt.size(); }
};

Scheduler::Scheduler(Executor& executor, const Tokenizer& tok, Metrics& metrics, SchedulerOptions options)
    : executor_(executor), tok_(tok), metrics_(metrics), opts_(options),
      slot_jobs_(static_cast<size_t>(executor.slots())) {
  opts_.max_step_tokens = std::max<int64_t>(1, opts_.max_step_tokens);
  metrics_.set_queue(0, 0, executor_.slots());
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int Scheduler::waiting() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(queue_.size());
}

int Scheduler::active() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(std::count_if(slot_jobs_.begin(), slot_jobs_.end(), [](const auto& j) { return j != nullptr; }));
}

std::shared_ptr<Stream> Scheduler::submit(Request request) {
  if (request.prompt.empty()) throw Refused(Refused::Why::BadRequest, "the prompt is empty (no tokens to start from)");
  if (request.options.max_tokens < 1)
    throw Refused(Refused::Why::BadRequest, "max_tokens must be at least 1 (got " +
                                                std::to_string(request.options.max_tokens) + ")");
  const int64_t cap = executor_.slot_capacity();
  if (static_cast<int64_t>(request.prompt.size()) >= cap) {
    metrics_.rejected("prompt_too_long");
    throw Refused(Refused::Why::TooLong, "the prompt has " + std::to_string(request.prompt.size()) +
                                             " tokens but a slot holds " + std::to_string(cap) +
                                             " positions (prompt and reply together); shorten it or raise --ctx");
  }
  for (TokenId t : request.prompt)
    if (t < 0 || t >= executor_.n_vocab())
      throw Refused(Refused::Why::BadRequest, "token id " + std::to_string(t) + " is outside the vocabulary");
  auto stream = std::make_shared<Stream>();
  stream->set_pace(opts_.stream_interval);
  auto job = std::make_shared<Job>(std::move(request), stream);
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw Refused(Refused::Why::ShuttingDown, "the server is shutting down");
    if (static_cast<int>(queue_.size()) >= opts_.max_queue) {
      metrics_.rejected("queue_full");
      throw Refused(Refused::Why::QueueFull, "the queue is full (" + std::to_string(queue_.size()) +
                                                 " requests waiting for " + std::to_string(executor_.slots()) +
                                                 " slots); retry later");
    }
    queue_.push_back(job);
  }
  metrics_.prompt_tokens(static_cast<int64_t>(job->req.prompt.size()));
  cv_.notify_all();
  return stream;
}

void Scheduler::finish(Job& job, const std::string& reason, const std::string& error) {
  if (job.done) return;
  job.done = true;
  const auto now = Clock::now();
  if (reason != "cancelled" && reason != "error") job.stream->push(job.out.flush());
  Completion c;
  c.text = job.out.shown();
  c.tokens = job.generated;
  c.finish_reason = reason;
  c.error = error;
  c.stopped_by = job.out.stopped_by();
  c.prompt_tokens = static_cast<int64_t>(job.req.prompt.size());
  c.completion_tokens = static_cast<int64_t>(job.generated.size());
  c.queue_ms = job.slot >= 0 ? ms_between(job.submitted, job.started) : ms_between(job.submitted, now);
  if (!job.generated.empty()) {
    c.ttft_ms = ms_between(job.submitted, job.first_token);
    c.gen_ms = ms_between(job.first_token, now);
  }
  job.result = std::move(c);
}

// Under the lock: frees the slots of finished jobs, then tells their clients (in that order,
// so a client that saw its end never finds its slot still taken).
void Scheduler::release_finished() {
  for (auto& j : slot_jobs_) {
    if (!j || !j->done) continue;
    auto job = std::move(j);
    j.reset();
    job->stream->finish(std::move(job->result));
  }
}

// Under the lock: moves queued requests into free slots, drops cancelled ones, and lists the
// jobs that run this step. False when there is nothing to do and the loop should stop.
bool Scheduler::admit_and_collect(std::vector<std::shared_ptr<Job>>& running) {
  std::unique_lock lock(mu_);
  for (;;) {
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->stream->cancelled()) {
        finish(**it, "cancelled");
        (*it)->stream->finish(std::move((*it)->result));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    for (size_t s = 0; s < slot_jobs_.size() && !queue_.empty(); ++s) {
      if (slot_jobs_[s]) continue;
      auto job = queue_.front();
      queue_.pop_front();
      job->slot = static_cast<int>(s);
      job->started = Clock::now();
      for (TokenId t : job->req.prompt) job->sampler.accept(t);
      slot_jobs_[s] = job;
    }
    running.clear();
    for (auto& j : slot_jobs_) {
      if (!j) continue;
      if (j->stream->cancelled() || stopping_) finish(*j, "cancelled");
      else running.push_back(j);
    }
    release_finished();
    metrics_.set_queue(static_cast<int64_t>(queue_.size()), static_cast<int64_t>(running.size()),
                       static_cast<int64_t>(slot_jobs_.size()));
    if (stopping_) {
      for (auto& j : queue_) {
        finish(*j, "cancelled");
        j->stream->finish(std::move(j->result));
      }
      queue_.clear();
      return false;
    }
    if (!running.empty()) return true;
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
  }
}

void Scheduler::loop() {
  std::vector<std::shared_ptr<Job>> running, stepped;
  std::vector<SlotFeed> feeds;
  std::vector<float> logits;
  while (admit_and_collect(running)) {
    // Generating requests first, one token each; the rest of the step's budget goes to prompts
    // in arrival order, so a long prompt cannot stall everyone's next token.
    feeds.clear();
    stepped.clear();
    int64_t budget = opts_.max_step_tokens;
    for (auto& j : running) {
      if (j->prefilling()) continue;
      feeds.push_back({j->slot, false, {j->next}});
      stepped.push_back(j);
    }
    for (auto& j : running) {
      if (!j->prefilling() || (budget <= 0 && !feeds.empty())) continue;
      const size_t left = j->req.prompt.size() - j->fed;
      const size_t n = std::min(left, static_cast<size_t>(std::max<int64_t>(budget, 1)));
      SlotFeed f{j->slot, j->fresh, {}};
      f.tokens.assign(j->req.prompt.begin() + static_cast<std::ptrdiff_t>(j->fed),
                      j->req.prompt.begin() + static_cast<std::ptrdiff_t>(j->fed + n));
      feeds.push_back(std::move(f));
      stepped.push_back(j);
      budget -= static_cast<int64_t>(n);
    }
    try {
      executor_.step(feeds, logits);
    } catch (const std::exception& e) {
      std::lock_guard lock(mu_);
      for (auto& j : stepped) finish(*j, "error", e.what());
      release_finished();
      continue;
    }
    const int64_t nv = executor_.n_vocab();
    for (size_t i = 0; i < stepped.size(); ++i) {
      Job& j = *stepped[i];
      j.fresh = false;
      j.positions += static_cast<int64_t>(feeds[i].tokens.size());
      if (j.prefilling()) {
        j.fed += feeds[i].tokens.size();
        if (j.prefilling()) continue;  // more prompt to go: these logits mean nothing yet
      }
      sample(j, &logits[i * static_cast<size_t>(nv)]);
    }
    waker_.wake(to_wake_);
    std::lock_guard lock(mu_);
    release_finished();
  }
}

// The same decisions as Engine::run, for one request: end of generation, stop strings, the
// token limit, a full slot, a client gone.
void Scheduler::sample(Job& j, const float* logits) {
  const GenerateOptions& o = j.req.options;
  const TokenId t = j.sampler.sample(logits, executor_.n_vocab());
  const auto now = Clock::now();
  if (o.stop_at_eog && tok_.is_eog(t)) return finish(j, "stop");
  if (j.generated.empty()) {
    j.first_token = now;
    metrics_.first_token(ms_between(j.submitted, now) / 1000.0);
  } else {
    metrics_.token(ms_between(j.last_token, now) / 1000.0);
  }
  j.last_token = now;
  metrics_.generated(1);
  j.generated.push_back(t);
  j.sampler.accept(t);
  if (j.stream->append(j.out.push(tok_.token_to_piece(t)))) to_wake_.push_back(j.stream);
  if (j.stream->cancelled()) return finish(j, "cancelled");
  if (j.out.stopped()) return finish(j, "stop");
  if (static_cast<int32_t>(j.generated.size()) >= o.max_tokens) return finish(j, "length");
  if (j.positions >= executor_.slot_capacity()) return finish(j, "length");
  j.next = t;
}

}  // namespace orchard::serve
