#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "model/grammar/grammar_matcher.h"
#include "tensor/error.h"

namespace orchard::serve {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Tokens a and b share from the start, at most `most`.
int64_t shared_prefix(const std::vector<TokenId>& a, const std::vector<TokenId>& b, size_t most) {
  most = std::min({most, a.size(), b.size()});
  size_t n = 0;
  while (n < most && a[n] == b[n]) ++n;
  return static_cast<int64_t>(n);
}

// A request waits for another still computing a prefix they share, until a slot holds all of
// it, when that prefix is at least this long (a shorter one costs less to compute again than a
// slot left idle meanwhile).
constexpr int64_t kWaitForPrefix = 64;

}  // namespace

struct Scheduler::Job {
  Request req;
  std::shared_ptr<Stream> stream;
  Sampler sampler;
  TextOutput out;
  int slot = -1;
  size_t fed = 0;                   // prompt tokens already in the slot
  bool fresh = true;                // the first feed, which prepares the slot, is still to come
  int64_t keep = 0;                 // what the first feed keeps of the slot (the cached prefix)
  int copy_from = -1;               // the slot the first feed copies that prefix from, or -1
  TokenId next = -1;                // generated token to feed at the next step
  std::vector<TokenId> generated;
  std::vector<TokenLogprob> logprobs;  // when the request asked for them
  GrammarMatcher grammar;              // constrained: what the reply so far is
  std::shared_ptr<GrammarVocab> gv;    // constrained: the grammar over the vocabulary, and the
  uint32_t state = 0;                  // reply's state in its automaton as of epoch dfa_epoch
  uint64_t dfa_epoch = UINT64_MAX;
  std::vector<float> masked;           // constrained: the logits with the tokens it forbids at −∞
  Clock::time_point submitted = Clock::now(), started, first_token, last_token;
  int64_t positions = 0;            // slot positions after the feeds so far
  bool done = false;
  Completion result;                // filled when done; published once the slot is free

  Job(Request r, std::shared_ptr<Stream> s)
      : req(std::move(r)), stream(std::move(s)), sampler(req.options.sampling), out(req.options.stop) {
    if (req.options.grammar) grammar = GrammarMatcher(req.options.grammar);
  }
  bool prefilling() const { return fed < req.prompt.size(); }
};

Scheduler::Scheduler(Executor& executor, const Tokenizer& tok, Metrics& metrics, SchedulerOptions options)
    : executor_(executor), tok_(tok), metrics_(metrics), opts_(options),
      slot_jobs_(static_cast<size_t>(executor.slots())), held_(static_cast<size_t>(executor.slots())),
      last_used_(static_cast<size_t>(executor.slots()), 0) {
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
  c.cached_tokens = job.slot >= 0 ? job.keep : 0;
  c.completion_tokens = static_cast<int64_t>(job.generated.size());
  c.logprobs = job.logprobs;
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

// Under the lock, on the scheduler thread: picks a free slot for `job` and what of its prompt it
// starts from. The prefix a slot holds is usable up to the prompt's last token (whose logits the
// first step must produce). The free slot holding the most of it wins; when another slot holds
// more (one generating, or one this round did not restart), the least recently used free slot
// takes a copy of that; with nothing cached anywhere, the least recently used free slot.
void Scheduler::place(Job& job, std::vector<bool>& restarted) {
  const std::vector<TokenId>& prompt = job.req.prompt;
  auto cached = [&](size_t s) { return opts_.prompt_cache ? shared_prefix(held_[s], prompt, prompt.size() - 1) : 0; };
  int best_free = -1, lru_free = -1, best_any = -1;
  int64_t free_len = -1, any_len = 0;
  for (size_t s = 0; s < slot_jobs_.size(); ++s) {
    const int64_t len = cached(s);
    if (!slot_jobs_[s]) {
      if (len > free_len || (len == free_len && last_used_[s] < last_used_[static_cast<size_t>(best_free)])) {
        best_free = static_cast<int>(s);
        free_len = len;
      }
      if (lru_free < 0 || last_used_[s] < last_used_[static_cast<size_t>(lru_free)]) lru_free = static_cast<int>(s);
    }
    if (!restarted[s] && len > any_len) {
      best_any = static_cast<int>(s);
      any_len = len;
    }
  }
  if (best_any >= 0 && any_len > free_len) {  // (best_any is then not free: no free slot holds that much)
    job.slot = lru_free;
    job.keep = any_len;
    job.copy_from = best_any;
  } else {
    job.slot = free_len > 0 ? best_free : lru_free;
    job.keep = std::max<int64_t>(free_len, 0);
    job.copy_from = -1;
  }
  const auto s = static_cast<size_t>(job.slot);
  restarted[s] = true;  // (held_ changes with the first feed, which may yet not run: a cancel)
  last_used_[s] = ++placements_;
  job.fed = static_cast<size_t>(job.keep);
  job.positions = job.keep;
  metrics_.prompt_placed(job.keep, static_cast<int64_t>(prompt.size()) - job.keep);
}

// Under the lock, on the scheduler thread: whether `job` should wait for a request already placed
// that is still computing a prefix of its prompt (sixteen clients with one long system prompt
// then compute it once, the first of them, and the others copy it from that slot).
bool Scheduler::waits_for_prefix(const Job& job, const std::vector<bool>& restarted) const {
  if (!opts_.prompt_cache) return false;
  const std::vector<TokenId>& prompt = job.req.prompt;
  int64_t ready = 0, pending = 0;
  for (size_t s = 0; s < slot_jobs_.size(); ++s) {
    if (!restarted[s]) ready = std::max(ready, shared_prefix(held_[s], prompt, prompt.size() - 1));
    const auto& other = slot_jobs_[s];
    if (other && !other->done && other->prefilling())
      pending = std::max(pending, shared_prefix(other->req.prompt, prompt, prompt.size() - 1));
  }
  return pending >= kWaitForPrefix && pending > ready;
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
    std::vector<bool> restarted(slot_jobs_.size(), false);
    while (!queue_.empty() && std::any_of(slot_jobs_.begin(), slot_jobs_.end(), [](const auto& j) { return !j; })) {
      if (waits_for_prefix(*queue_.front(), restarted)) break;  // (in order: the queue stays first come, first served)
      auto job = queue_.front();
      queue_.pop_front();
      place(*job, restarted);
      job->started = Clock::now();
      for (TokenId t : job->req.prompt) job->sampler.accept(t);
      slot_jobs_[static_cast<size_t>(job->slot)] = job;
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
      feeds.push_back({j->slot, -1, -1, {j->next}});
      stepped.push_back(j);
    }
    const size_t generating = feeds.size();
    // With a step time to keep to and requests generating: as many prompt tokens as fit in it.
    if (opts_.step_ms > 0 && generating > 0 && prompt_token_ms_ > 0)
      budget = std::clamp<int64_t>(static_cast<int64_t>((opts_.step_ms - generating_step_ms_) / prompt_token_ms_), 1,
                                   opts_.max_step_tokens);
    // (A request's first feed always runs in the step after it was placed: it prepares the slot
    // while the slot it may copy from still holds what place() saw.)
    for (auto& j : running) {
      if (!j->prefilling() || (budget <= 0 && !feeds.empty() && !j->fresh)) continue;
      const size_t left = j->req.prompt.size() - j->fed;
      const size_t n = std::min(left, static_cast<size_t>(std::max<int64_t>(budget, 1)));
      SlotFeed f{j->slot, j->fresh ? j->keep : -1, j->fresh ? j->copy_from : -1, {}};
      if (j->fresh) held_[static_cast<size_t>(j->slot)].assign(j->req.prompt.begin(), j->req.prompt.begin() + j->keep);
      f.tokens.assign(j->req.prompt.begin() + static_cast<std::ptrdiff_t>(j->fed),
                      j->req.prompt.begin() + static_cast<std::ptrdiff_t>(j->fed + n));
      feeds.push_back(std::move(f));
      stepped.push_back(j);
      budget -= static_cast<int64_t>(n);
    }
    const auto step_start = Clock::now();
    try {
      executor_.step(feeds, logits);
      // The costs step_ms sizes steps by, smoothed: a generating-only step, and each prompt
      // token beyond it.
      const double ms = ms_between(step_start, Clock::now());
      size_t prompt_tokens = 0;
      for (size_t i = generating; i < feeds.size(); ++i) prompt_tokens += feeds[i].tokens.size();
      auto smooth = [](double& avg, double v) { avg = avg > 0 ? 0.8 * avg + 0.2 * v : v; };
      if (prompt_tokens == 0) smooth(generating_step_ms_, ms);
      else smooth(prompt_token_ms_, std::max(0.0, ms - (generating > 0 ? generating_step_ms_ : 0.0)) / static_cast<double>(prompt_tokens));
    } catch (const std::exception& e) {
      std::lock_guard lock(mu_);
      for (auto& j : stepped) {
        held_[static_cast<size_t>(j->slot)].clear();  // what the slot holds is unknown now
        finish(*j, "error", e.what());
      }
      release_finished();
      continue;
    }
    for (const SlotFeed& f : feeds) {
      auto& h = held_[static_cast<size_t>(f.slot)];
      h.insert(h.end(), f.tokens.begin(), f.tokens.end());
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

// log p(t) = l_t − max − ln Σ exp(l − max), over the raw logits (what the model says, before the
// request's temperature, penalties and cuts), with the `top` most likely tokens.
TokenLogprob Scheduler::token_logprob(const float* logits, int64_t n_vocab, TokenId t, int32_t top) const {
  const float max = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  const double log_z = std::log(sum);
  auto logprob = [&](int64_t i) { return static_cast<float>(logits[i] - max - log_z); };
  TokenLogprob lp;
  lp.piece = tok_.token_to_piece(t);
  lp.logprob = logprob(t);
  if (top > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int64_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    const auto k = std::min<size_t>(static_cast<size_t>(top), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    });
    for (size_t i = 0; i < k; ++i) lp.top.emplace_back(tok_.token_to_piece(ids[i]), logprob(ids[i]));
  }
  return lp;
}

// The same decisions as Engine::run, for one request: end of generation, stop strings, the
// token limit, a full slot, a client gone.
// JSON mode: the logits with every token at −∞ whose text would stop the reply being (the start
// of) one JSON object, and end-of-generation allowed only once it is whole. When the tokens left
// barely cover the shortest closing text, only tokens that shorten it remain. Null when no token
// can continue.
std::shared_ptr<GrammarVocab> Scheduler::grammar_vocab(const std::shared_ptr<const Grammar>& grammar) {
  constexpr size_t kKeep = 8;
  if (!vocab_) vocab_ = VocabPieces::of(tok_, executor_.n_vocab());
  std::shared_ptr<GrammarVocab> gv;
  std::erase_if(grammar_vocabs_, [](const auto& a) { return a.second.expired(); });
  for (const auto& [g, weak] : grammar_vocabs_)
    if (g == grammar.get()) gv = weak.lock();
  if (!gv) {
    gv = std::make_shared<GrammarVocab>(grammar, vocab_->trie);
    grammar_vocabs_.emplace_back(grammar.get(), gv);
  }
  std::erase(recent_grammar_vocabs_, gv);
  recent_grammar_vocabs_.push_front(gv);
  if (recent_grammar_vocabs_.size() > kKeep) recent_grammar_vocabs_.pop_back();
  return gv;
}

const float* Scheduler::grammar_mask(Job& j, const float* logits) {
  const int64_t nv = executor_.n_vocab();
  if (!j.gv) j.gv = grammar_vocab(j.req.options.grammar);
  GrammarDfa& dfa = j.gv->dfa();
  j.gv->trim(kMaxGrammarStates, kMaxGrammarListed);
  if (j.dfa_epoch != dfa.epoch()) {
    j.state = dfa.intern(j.grammar);
    j.dfa_epoch = dfa.epoch();
  }
  // Tokens still to come: up to max_tokens, and up to a full slot.
  const int64_t left = std::min(j.req.options.max_tokens - static_cast<int64_t>(j.generated.size()),
                                executor_.slot_capacity() - j.positions);
  return mask_logits(*j.gv, j.state, logits, nv, left, vocab_->eog, j.masked);
}

void Scheduler::sample(Job& j, const float* logits) {
  const GenerateOptions& o = j.req.options;
  const float* raw = logits;  // what logprobs report
  if (o.grammar && !(logits = grammar_mask(j, logits))) return finish(j, "stop");
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
  if (o.logprobs >= 0) {
    TokenLogprob lp = token_logprob(raw, executor_.n_vocab(), t, o.logprobs);
    j.logprobs.push_back(lp);
    j.stream->append_logprob(std::move(lp));
  }
  if (j.stream->append(j.out.push(tok_.token_to_piece(t)))) to_wake_.push_back(j.stream);
  if (j.stream->cancelled()) return finish(j, "cancelled");
  if (j.out.stopped()) return finish(j, "stop");
  if (o.grammar && !tok_.is_eog(t)) {
    // The mask admitted t, so its bytes lead somewhere (read from the automaton's table).
    j.state = advance(j.gv->dfa(), j.state, vocab_->pieces[static_cast<size_t>(t)]);
    if (j.state == GrammarDfa::kDead) return finish(j, "stop");
    const GrammarDfa& dfa = j.gv->dfa();
    j.grammar = dfa.matcher(j.state);
    if (dfa.complete(j.state) && !dfa.can_continue(j.state)) return finish(j, "stop");
  }
  if (static_cast<int32_t>(j.generated.size()) >= o.max_tokens) return finish(j, "length");
  if (j.positions >= executor_.slot_capacity()) return finish(j, "length");
  j.next = t;
}

}  // namespace orchard::serve
