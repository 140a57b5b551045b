// The long-poll for work, parked without a thread, and the dispatcher that answers parked polls.
// A node asks for work and waits up to `wait` seconds: the request is answered at once when an
// attempt is assigned to the node, else parked (serve::Reply) until the dispatcher finds work
// assigned to it, or 204 at the deadline. Tens of thousands of idle nodes then cost memory, not
// threads, and a job reaches its node as soon as it is placed.
#include "network/coordinator_state.h"
#include "network/protocol_names.h"
#include "serve/request_params.h"

namespace orchard::network {

using nlohmann::json;

namespace {

httplib::Response no_content() {
  httplib::Response r;
  r.status = 204;
  return r;
}

httplib::Response work_response(const Work& w) {
  httplib::Response r;
  serve::send_json(r, to_json(w));
  return r;
}

// Gives the node its assigned work through its parked poll. The attempt is marked fetched as
// the answer goes out, so an answer that cannot reach the node (it hung up just then) hands
// the attempt back at once, instead of holding the job until its lease runs out.
void hand_work(Coordinator::State& s, const std::string& node, const serve::ReplyPtr& reply) {
  std::optional<Work> w;
  try {
    w = s.with_store([&](JobStore& st) { return st.next_job_for(node, unix_ms()); });
  } catch (const std::exception& e) {
    // Banned in between, or the store failing: the node hears it on its next poll.
    reply->send(no_content());
    if (s.opts.log) std::fprintf(stderr, "coordinator: work for %s: %s\n", node.c_str(), e.what());
    return;
  }
  if (!w) {
    reply->send(no_content());
    return;
  }
  auto give_back = [&s, node, job = w->job_id, attempt = w->attempt] {
    try {
      s.with_store([&](JobStore& st) { st.hand_back(job, attempt, node, unix_ms()); });
      s.work.notify();
      if (s.opts.log)
        std::fprintf(stderr, "coordinator: %s attempt %lld handed back: node %s left before it was sent\n", job.c_str(),
                     static_cast<long long>(attempt), node.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "coordinator: handing back %s for %s: %s\n", job.c_str(), node.c_str(), e.what());
    }
  };
  if (!reply->send(work_response(*w), give_back)) give_back();
}

void dispatch_round(Coordinator::State& s) {
  for (const serve::ReplyPtr& r : s.polls.take_due(ParkedPolls::Clock::now())) r->send(no_content());
  std::lock_guard lock(s.dispatch_mu);
  if (s.polls.size() == 0) return;  // nobody waits; polls that come place queued jobs themselves
  const std::vector<std::string> ready = s.with_store([](JobStore& st) {
    if (st.has_queued()) st.assign_queued(unix_ms());
    return st.nodes_with_assigned_work();
  });
  for (const std::string& node : ready)
    if (serve::ReplyPtr r = s.polls.take(node)) hand_work(s, node, r);
}

void poll_work(Coordinator::State& s, const AuthResult& a, const httplib::Request& req, httplib::Response& res,
               const serve::ReplyPtr& reply) {
  const json body = req.body.empty() ? json::object() : serve::parse_body(req.body);
  const int wait_s = std::clamp(body.contains("wait") ? body_field<int>(body, "wait") : 0, 0, kMaxPollWaitS);
  std::lock_guard lock(s.dispatch_mu);
  // Each look places queued jobs too (next_job_for), so a job another node gave back finds a
  // taker here.
  const std::optional<Work> w = s.with_store([&](JobStore& st) { return st.next_job_for(a.node_id, unix_ms()); });
  if (w) return serve::send_json(res, to_json(*w));
  if (wait_s == 0 || s.stopping) {
    res.status = 204;
    return;
  }
  const auto deadline = ParkedPolls::Clock::now() + std::chrono::seconds(wait_s);
  if (serve::ReplyPtr older = s.polls.park(a.node_id, deadline, reply)) older->send(no_content());
  reply->on_hang_up([&s, node = a.node_id, r = reply.get()] { s.polls.forget(node, r); });
  // `res` stays unanswered: the dispatcher answers through `reply`.
}

}  // namespace

void run_dispatcher(Coordinator::State& s) {
  uint64_t seen = s.work.generation();
  while (!s.stopping) {
    // Another coordinator sharing the database cannot signal this one: a round at least every
    // quarter second finds what it assigned to nodes parked here.
    s.work.wait_since(seen, std::chrono::milliseconds(250));
    try {
      dispatch_round(s);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "coordinator: dispatching work failed: %s\n", e.what());
    }
  }
  // Under the lock: a poll that saw the coordinator running has parked by now, and later ones
  // see it stopping.
  std::lock_guard lock(s.dispatch_mu);
  for (const serve::ReplyPtr& r : s.polls.take_all()) r->send(no_content());
}

void add_poll_route(Coordinator::State& s) {
  s.http->post_deferred(kWorkPath, [&s](const httplib::Request& req, httplib::Response& res, const serve::ReplyPtr& reply) {
    node_endpoint(s, false, [&](const AuthResult& a, const httplib::Request& r, httplib::Response& out) {
      poll_work(s, a, r, out, reply);
    })(req, res);
  });
}

}  // namespace orchard::network
