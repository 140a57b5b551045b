#include "node/agent.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <random>

#include "dist/group.h"
#include "model/text_output.h"
#include "node/audit_runner.h"
#include "platform/platform.h"
#include "protocol/memory_proof.h"

namespace orchard::node {

using protocol::OutputChunk;

namespace {

// Sleeps up to `ms`, waking early when `stop()` turns true.
template <class Stop>
void nap(int64_t ms, Stop stop) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stop() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

// A failure worth trying again: no answer, or the coordinator's own trouble.
// `orchard node --cheat random-tokens`: tokens drawn uniformly from the vocabulary, streamed
// as an honest node streams its own, for the tests of the coordinator's audits.
GenerateResult random_tokens(const Engine& engine, int32_t count, const OnPiece& on_piece) {
  GenerateResult r;
  r.finish_reason = "length";
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(engine.hparams().n_vocab) - 1);
  TextOutput out;
  size_t unshown = 0;  // tokens whose text is held back (part of a UTF-8 character) go with the next piece
  for (int32_t i = 0; i < count; ++i) {
    TokenId t = pick(rng);
    while (engine.tokenizer().is_eog(t)) t = pick(rng);
    r.tokens.push_back(t);
    const std::string text = out.push(engine.tokenizer().token_to_piece(t));
    if (text.empty()) continue;
    const std::span<const TokenId> shown(r.tokens.data() + unshown, r.tokens.size() - unshown);
    unshown = r.tokens.size();
    if (!on_piece(text, shown)) break;
  }
  return r;
}

bool transient(const CallError& e) { return (e.status == 0 && e.code != "tls") || e.status >= 500; }

constexpr int kRetries = 20;
constexpr int64_t kRetryMs = 250;

}  // namespace

// Sends one attempt's output from its own thread, batching whatever accumulated while the
// previous request was in flight, so generation never waits for the network.
class Agent::Sender {
 public:
  Sender(const CoordinatorClient& client, std::string job, int64_t attempt, const std::atomic<bool>& killed)
      : client_(client), job_(std::move(job)), attempt_(attempt), killed_(killed), thread_([this] { loop(); }) {}
  ~Sender() { flush(); }

  void push(OutputChunk c) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(c));
    }
    cv_.notify_all();
  }
  // Waits until every queued chunk is stored (or the node was killed); false when the attempt
  // was lost: the coordinator refused it (403: the lease ran out and the job moved on) or
  // stayed unreachable.
  bool flush() {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return !lost_;
  }
  bool lost() const { return lost_; }
  const std::string& why() const { return why_; }

 private:
  void loop() {
    for (;;) {
      std::vector<OutputChunk> batch;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || closing_; });
        if (queue_.empty()) return;
        batch.assign(queue_.begin(), queue_.end());
        queue_.clear();
      }
      for (int attempt = 0;; ++attempt) {
        if (killed_) return;
        try {
          client_.append(job_, attempt_, batch);
          break;
        } catch (const CallError& e) {
          if (!transient(e) || attempt + 1 >= kRetries) {
            why_ = e.what();
            lost_ = true;
            return;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(kRetryMs));
      }
    }
  }

  const CoordinatorClient& client_;
  const std::string job_;
  const int64_t attempt_;
  const std::atomic<bool>& killed_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<OutputChunk> queue_;
  bool closing_ = false;
  std::atomic<bool> lost_{false};
  std::string why_;
  std::thread thread_;
};

Agent::Agent(AgentOptions options, protocol::NodeIdentity identity, std::vector<ServedModel> models)
    : opts_(std::move(options)),
      identity_(std::move(identity)),
      models_(std::move(models)),
      client_(opts_.coordinator, identity_, opts_.ca_cert) {
  if (models_.empty()) throw Error("the node serves no model (give one with -m)");
  info_.id = identity_.id();
  info_.owner = opts_.owner;
  info_.hardware = opts_.hardware;
  info_.region = opts_.region;
  if (opts_.machines.empty()) {
    info_.machines = {this_machine(opts_.chip, opts_.memory_bytes, opts_.bandwidth_gbs)};
  } else {
    info_.machines = opts_.machines;
    info_.group = opts_.group;
  }
  for (const ServedModel& s : models_) {
    info_.models.push_back(s.info);
    info_.max_context = std::max(info_.max_context, s.engine->n_ctx());
  }
  info_.max_jobs = 1;  // one engine, one job at a time
  info_.lending = opts_.lending.mode;
}

Agent::~Agent() {
  done_ = true;
  if (heartbeats_.joinable()) heartbeats_.join();
  if (activity_watch_.joinable()) activity_watch_.join();
}

protocol::NodeInfo Agent::describe() const { return info_; }

void Agent::log(const std::string& line) const {
  if (opts_.log) std::fprintf(stderr, "orchard node %s: %s\n", identity_.id().c_str(), line.c_str());
}

std::string Agent::lending_refusal() const {
  const int64_t idle = user_idle_ms_.load();
  return opts_.lending.refusal(load_per_core(), local_minute_of_day(), idle < 0 ? std::nullopt : std::optional(idle));
}

void Agent::check_activity() {
  std::optional<int64_t> idle;
  try {
    idle = opts_.activity->idle_ms();
  } catch (const std::exception& e) {
    log(std::string("reading the user's activity: ") + e.what());
  }
  user_idle_ms_ = idle.value_or(-1);
  const bool active = opts_.lending.user_is_active(idle);
  if (active != user_active_.exchange(active))
    log(active ? "the user is at the machine: not lending (" + lending_refusal() + ")"
               : "the user has been away long enough: lending again");
}

void Agent::activity_loop() {
  while (!killed_ && !done_) {
    nap(opts_.activity_check_ms, [&] { return killed_.load() || done_.load(); });
    if (!killed_ && !done_) check_activity();
  }
}

protocol::HeartbeatState Agent::heartbeat_state() {
  protocol::HeartbeatState h;
  // Below 1: a fully used CPU still takes work when its owner dedicated it; the score prefers
  // idler nodes.
  h.load = std::clamp(load_per_core().value_or(0.0), 0.0, 0.95);
  std::lock_guard lock(running_mu_);
  h.running = running_job_.empty() ? std::vector<std::string>{} : std::vector<std::string>{running_job_};
  if (draining_ || !lending_refusal().empty())
    h.status = protocol::NodeStatus::Draining;
  else if (!running_job_.empty())
    h.status = protocol::NodeStatus::Busy;
  return h;
}

void Agent::register_until_accepted() {
  protocol::NodeInfo info = info_;
  info.state = heartbeat_state();
  for (int64_t wait_ms = 500;; wait_ms = std::min<int64_t>(wait_ms * 2, 10'000)) {
    try {
      const protocol::RegisterReply r = client_.register_node(info);
      heartbeat_interval_ms_ = r.heartbeat_interval_ms;
      memory_check_ = r.memory_challenge;
      log("registered with " + client_.url() + " (heartbeat every " + std::to_string(r.heartbeat_interval_ms) + " ms)");
      return;
    } catch (const CallError& e) {
      if (e.code == "tls") throw Error(e.what());
      if (!transient(e)) throw Error(std::string("the coordinator refused this node: ") + e.what());
      log(std::string(e.what()) + "; retrying");
    }
    nap(wait_ms, [&] { return stopping(); });
    if (stopping()) return;
  }
}

bool Agent::answer_memory_check() {
  const protocol::MemoryChallenge c = *memory_check_;
  memory_check_.reset();
  const uint64_t need = protocol::memory_fill_bytes(c);
  const bool skimp = opts_.cheat == "skimp-memory";
  // Filling more than is free would push this machine into swap (or the OOM killer) and still
  // miss the deadline: say so instead.
  if (const auto avail = platform::available_memory_bytes(); avail && *avail < need && !skimp) {
    fatal_ = "the coordinator checks " + std::to_string(c.bytes() >> 20) + " MiB of the memory this node claims (" +
             std::to_string(need >> 20) + " MiB with its hashes), but only " + std::to_string(*avail >> 20) +
             " MiB are free: lend less (--memory) or free memory";
    return false;
  }
  log("proving " + std::to_string(c.bytes() >> 20) + " MiB of memory to the coordinator");
  // A call that fails for a moment is tried again; the answer must still come in time.
  auto with_retries = [&](auto call) {
    for (int tries = 0;; ++tries) {
      try {
        return call();
      } catch (const CallError& e) {
        if (!transient(e) || tries == 3 || stopping()) throw;
        log(std::string("memory check: ") + e.what() + "; retrying");
        nap(500, [&] { return stopping(); });
      }
    }
  };
  try {
    const protocol::MemoryFill fill(c, [&] { return stopping(); }, skimp ? c.blocks / 16 : UINT64_MAX);
    const std::vector<uint64_t> probes = with_retries([&] { return client_.commit_memory(c.seed, fill.root()); });
    const protocol::MemoryProof proof = fill.open(probes);
    with_retries([&] {
      client_.open_memory(proof);
      return true;
    });
    log("memory proved (filled in " + std::to_string(fill.fill_s()) + " s)");
    return true;
  } catch (const CallError& e) {
    if (e.code == "stale_memory_check" || e.code == "no_memory_check") {
      log(std::string("memory check: ") + e.what());  // a registration since brought another
      return true;
    }
    if (e.status == 401 && e.code == "unknown_node") {
      register_until_accepted();  // the coordinator lost us: a new registration, a new check
      return true;
    }
    fatal_ = std::string("the coordinator's memory check: ") + e.what();
    return false;
  } catch (const std::bad_alloc&) {
    fatal_ = "the coordinator's memory check: cannot allocate " + std::to_string(need >> 20) + " MiB";
    return false;
  } catch (const Error& e) {
    if (stopping()) return false;
    fatal_ = e.what();
    return false;
  }
}

void Agent::heartbeat_loop() {
  while (!killed_ && !done_) {
    nap(heartbeat_interval_ms_, [&] { return killed_.load() || done_.load(); });
    if (killed_ || done_) return;
    try {
      client_.heartbeat(heartbeat_state());
    } catch (const CallError& e) {
      log(std::string("heartbeat: ") + e.what());
    }
  }
}

void Agent::run() {
  if (opts_.lending.mode == protocol::Lending::WhenIdle && opts_.lending.idle_after_ms) {
    if (!opts_.activity) opts_.activity = std::make_shared<SystemActivity>();
    check_activity();  // before registering: the first status says whether it lends
    activity_watch_ = std::thread([this] { activity_loop(); });
  }
  register_until_accepted();
  heartbeats_ = std::thread([this] { heartbeat_loop(); });
  while (!stopping()) {
    if (memory_check_ && !answer_memory_check()) break;
    const std::string refusal = lending_refusal();
    std::optional<protocol::Work> work;
    try {
      // Not lending: still ask, without waiting, for a job assigned before the coordinator
      // heard that, so it can be given back at once instead of waiting out its lease.
      work = client_.poll(refusal.empty() ? opts_.poll_wait_s : 0);
    } catch (const CallError& e) {
      log(std::string("poll: ") + e.what());
      if (e.code == "banned") {
        // Caught by an audit: the coordinator gives this node no more work, whatever it does.
        fatal_ = std::string("the coordinator stopped giving this node work: ") + e.what();
        break;
      }
      if (e.status == 401 && e.code == "unknown_node") register_until_accepted();  // the coordinator lost us
      nap(1000, [&] { return stopping(); });
      continue;
    }
    if (killed_) break;
    if (work && (draining_ || !refusal.empty())) {
      try {
        client_.heartbeat(heartbeat_state());
        client_.hand_back(work->job_id, work->attempt);
      } catch (const CallError& e) {
        log(std::string("hand back: ") + e.what());
      }
      work.reset();
    }
    if (work) {
      run_job(*work);
      // Said now, not at the next beat: until then the coordinator sees this node busy.
      try {
        client_.heartbeat(heartbeat_state());
      } catch (const CallError& e) {
        log(std::string("heartbeat: ") + e.what());
      }
    } else if (!refusal.empty()) {
      nap(1000, [&] { return stopping(); });
    }
  }
  done_ = true;
  if (heartbeats_.joinable()) heartbeats_.join();
  if (activity_watch_.joinable()) activity_watch_.join();
  if (!fatal_.empty()) throw Error(fatal_);
}

void Agent::run_job(const protocol::Work& w) {
  const std::string name = w.job_id + " attempt " + std::to_string(w.attempt);
  auto report_failure = [&](const std::string& why) {
    log(name + ": cannot run it: " + why);
    try {
      client_.fail(w.job_id, w.attempt, why);
    } catch (const CallError& e) {
      log(std::string("fail: ") + e.what());
    }
  };
  auto model = std::find_if(models_.begin(), models_.end(), [&](const ServedModel& m) { return m.name == w.model; });
  if (model == models_.end()) return report_failure("this node does not serve the model '" + w.model + "'");
  if (w.request.is_object() && w.request.value("api", "") == protocol::kAuditApi) return run_audit_job(w, *model);
  PreparedJob p;
  try {
    p = prepare_job(w, *model);
  } catch (const std::exception& e) {
    return report_failure(e.what());
  }
  log(name + ": " + std::to_string(p.prompt_tokens) + " prompt tokens" +
      (p.generated_before ? ", resuming after " + std::to_string(p.generated_before) + " generated" : std::string()));
  if (opts_.cheat == "late-report") {
    // Sits on the job without a word (its heartbeats do not list it) until its lease is over
    // and it went to another node, then streams and completes it as if it were still its own.
    const int64_t lease_left = w.lease_deadline_ms - std::chrono::duration_cast<std::chrono::milliseconds>(
                                                         std::chrono::system_clock::now().time_since_epoch())
                                                         .count();
    nap(std::max<int64_t>(0, lease_left) + 4'000, [&] { return killed_.load(); });
  }
  {
    std::lock_guard lock(running_mu_);
    running_job_ = w.job_id;
  }
  GenerateResult r;
  r.finish_reason = "length";
  Sender sender(client_, w.job_id, w.attempt, killed_);
  try {
    int64_t index = p.next_index;
    if (opts_.cheat == "random-tokens") {
      r = random_tokens(*model->engine, p.options.max_tokens, [&](const std::string& text, std::span<const TokenId> tokens) {
        sender.push({index++, text, std::vector<int32_t>(tokens.begin(), tokens.end())});
        return !stopping() && !sender.lost();
      });
    } else if (p.options.max_tokens > 0 && static_cast<int64_t>(p.tokens.size()) < model->engine->n_ctx())
      r = model->generate(p.tokens, p.options, [&](const std::string& text, std::span<const TokenId> tokens) {
        // The user coming back ends the job here as draining does: handed back below.
        if (stopping() || sender.lost() || user_active_) return false;
        sender.push({index, text, std::vector<int32_t>(tokens.begin(), tokens.end())});
        if (opts_.on_chunk) opts_.on_chunk(w.job_id, index);
        ++index;
        return !stopping() && !sender.lost() && !user_active_;
      });
  } catch (const dist::CommError& e) {
    // A group whose ranks lost each other can run nothing more: the job goes back for another
    // node, and this one stops (run() throws, so the group's job ends and says why).
    {
      std::lock_guard lock(running_mu_);
      running_job_.clear();
    }
    if (killed_) return;
    sender.flush();
    fatal_ = std::string("the group's ranks lost each other: ") + e.what();
    draining_ = true;
    try {
      client_.heartbeat(heartbeat_state());
      client_.hand_back(w.job_id, w.attempt);
    } catch (const CallError& c) {
      log(std::string("hand back: ") + c.what());
    }
    return;
  } catch (const std::exception& e) {
    std::lock_guard lock(running_mu_);
    running_job_.clear();
    if (killed_) return;
    sender.flush();
    return report_failure(std::string("the engine failed: ") + e.what());
  }
  {
    std::lock_guard lock(running_mu_);
    running_job_.clear();
  }
  if (killed_) return;
  if (!sender.flush()) return log(name + ": lost: " + sender.why());
  if (r.finish_reason == "cancelled") {
    // Draining, or the user is back: what was streamed stays; the next node continues after
    // it. Saying so first keeps the job from being placed straight back here.
    try {
      client_.heartbeat(heartbeat_state());
      client_.hand_back(w.job_id, w.attempt);
      log(name + ": handed back");
    } catch (const CallError& e) {
      log(std::string("hand back: ") + e.what());
    }
    return;
  }
  const int64_t generated = p.generated_before + static_cast<int64_t>(r.tokens.size());
  const bool inflate = opts_.cheat == "inflate-tokens";
  const int64_t claimed_prompt = static_cast<int64_t>(p.prompt_tokens) * (inflate ? 10 : 1) + (inflate ? 1000 : 0);
  const int64_t claimed_generated = generated * (inflate ? 10 : 1) + (inflate ? 1000 : 0);
  complete_job(w, name, claimed_prompt, claimed_generated, r.finish_reason, generated);
}

void Agent::complete_job(const protocol::Work& w, const std::string& name, int64_t prompt_tokens,
                         int64_t generated_tokens, const std::string& finish_reason, int64_t shown_tokens) {
  for (int attempt = 0;; ++attempt) {
    try {
      const auto reply = client_.complete(w.job_id, w.attempt, prompt_tokens, generated_tokens, finish_reason);
      ++completed_;
      const nlohmann::json credits = reply.value("credits", nlohmann::json(0));
      log(name + ": done, " + std::to_string(shown_tokens) + " tokens, " + credits.dump() + " micro-credits" +
          (reply.value("settlement", "") == "pending" ? " (pending until the audit window closes)" : ""));
      return;
    } catch (const CallError& e) {
      if (!transient(e) || attempt + 1 >= kRetries || killed_) return log(std::string("complete: ") + e.what());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kRetryMs));
  }
}

void Agent::run_audit_job(const protocol::Work& w, ServedModel& model) {
  const std::string name = w.job_id + " attempt " + std::to_string(w.attempt) + " (audit)";
  {
    std::lock_guard lock(running_mu_);
    running_job_ = w.job_id;
  }
  protocol::AuditReport report;
  std::string error;
  try {
    report = run_audit(w, model);
  } catch (const std::exception& e) {
    error = e.what();
  }
  {
    std::lock_guard lock(running_mu_);
    running_job_.clear();
  }
  if (killed_) return;
  if (!error.empty()) {
    log(name + ": cannot run it: " + error);
    try {
      client_.fail(w.job_id, w.attempt, error);
    } catch (const CallError& e) {
      log(std::string("fail: ") + e.what());
    }
    return;
  }
  log(name + ": scored " + std::to_string(report.positions.size()) + " tokens");
  Sender sender(client_, w.job_id, w.attempt, killed_);
  sender.push({0, protocol::to_json(report).dump(), {}});
  if (!sender.flush()) return log(name + ": lost: " + sender.why());
  complete_job(w, name, 0, 1, "stop", static_cast<int64_t>(report.positions.size()));
}

}  // namespace orchard::node
