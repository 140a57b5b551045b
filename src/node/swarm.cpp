#include "node/swarm.h"

#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it (Boost 1.74)

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "platform/platform.h"
#include "platform/wall_clock.h"
#include "protocol/keys.h"
#include "protocol/messages.h"
#include "protocol/node_identity.h"
#include "protocol/node_info.h"
#include "protocol/request_signing.h"
#include "tensor/error.h"

namespace orchard::node {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kIdleModel = "swarm-idle";
constexpr const char* kChatModel = "swarm-chat";
constexpr const char* kWorkerText = "swarm says hello";

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

protocol::NodeInfo describe(const protocol::NodeIdentity& id, int index, bool worker) {
  protocol::NodeInfo n;
  n.id = id.id();
  n.owner = "swarm-owner-" + std::to_string(index % 97);
  protocol::MachineInfo m;
  m.name = "swarm-" + std::to_string(index);
  m.chip = "cpu";
  m.memory_bytes = uint64_t{64} << 30;
  m.mem_bw_gbs = 200;
  m.cores = 8;
  n.machines.push_back(m);
  protocol::ModelInfo model;
  model.name = worker ? kChatModel : kIdleModel;
  model.spec = "llama-3.1-8b";
  model.shape = parallel::model_spec(model.spec, DType::Q4_0);
  model.shape.name = model.spec;
  n.models.push_back(model);
  n.max_context = 8192;
  n.max_jobs = worker ? 4 : 1;
  n.lending = protocol::Lending::Dedicated;
  return n;
}

struct Swarm;

// One simulated node: one keep-alive connection, one request at a time; registers, then polls
// for ever. A failed request is counted and the node starts over on a new connection.
class SimNode : public std::enable_shared_from_this<SimNode> {
 public:
  SimNode(Swarm& s, int index, bool worker);
  void start();
  bool polling() const { return polling_; }

 private:
  void connect_then(std::function<void()> next);
  void post(const std::string& target, const json& body, std::function<void(int, const std::string&)> done);
  void do_register();
  void poll();
  void answer(const protocol::Work& w);
  void failed(const std::string& what);

  Swarm& s_;
  int index_;
  bool worker_;
  protocol::NodeIdentity id_;
  tcp::socket socket_;
  beast::flat_buffer buf_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
  net::steady_timer retry_;
  bool registered_ = false, polling_ = false;
};

// The chat client: one keep-alive connection, chats one after another, each timed to its first
// token (the first read holding the workers' text) and to its end.
class Chatter : public std::enable_shared_from_this<Chatter> {
 public:
  explicit Chatter(Swarm& s);
  void start() { next(); }

 private:
  void next();
  void read_more();
  Swarm& s_;
  tcp::socket socket_;
  beast::flat_buffer buf_;
  http::request<http::string_body> req_;
  std::optional<http::response_parser<http::string_body>> parser_;
  Clock::time_point sent_;
  bool got_first_ = false;
  int done_ = 0;
};

struct Swarm {
  SwarmOptions o;
  std::function<void(const std::string&)> progress;
  net::io_context ioc;
  tcp::endpoint server;
  SwarmReport report;
  std::vector<std::shared_ptr<SimNode>> nodes;
  size_t launched = 0;
  int registering = 0;
  int polling = 0;
  Clock::time_point began = Clock::now(), last_progress = Clock::now();
  bool chats_started = false;
  net::steady_timer ticker{ioc};

  net::ip::address source(int index) const {
    const int n = std::max(1, o.source_addresses);
    return net::ip::make_address_v4(0x7F000100u + static_cast<uint32_t>(1 + index % n));  // 127.0.1.x
  }
  void note_error(const std::string& what) {
    ++report.errors;
    if (report.first_error.empty()) report.first_error = what;
    last_progress = Clock::now();
  }
  void launch() {
    while (launched < nodes.size() && registering < o.in_flight) {
      ++registering;
      nodes[launched++]->start();
    }
  }
  void registered_one() {
    --registering;
    ++report.registered;
    last_progress = Clock::now();
    if (progress && report.registered % 1000 == 0)
      progress(std::to_string(report.registered) + " nodes registered (" + std::to_string(polling) + " polling)");
    launch();
  }
  void tick();
};

SimNode::SimNode(Swarm& s, int index, bool worker)
    : s_(s),
      index_(index),
      worker_(worker),
      id_(protocol::NodeIdentity::from_key(protocol::generate_ed25519_key())),
      socket_(s.ioc),
      retry_(s.ioc) {}

void SimNode::start() {
  connect_then([self = shared_from_this()] { self->do_register(); });
}

void SimNode::connect_then(std::function<void()> next) {
  error_code ec;
  if (socket_.is_open()) socket_.close(ec);
  socket_.open(tcp::v4(), ec);
  if (!ec) socket_.bind(tcp::endpoint(s_.source(index_), 0), ec);
  if (ec) return failed("binding to " + s_.source(index_).to_string() + ": " + ec.message());
  socket_.async_connect(s_.server, [self = shared_from_this(), next = std::move(next)](error_code e) {
    if (e) return self->failed("connecting: " + e.message());
    error_code ignored;
    self->socket_.set_option(tcp::no_delay(true), ignored);
    next();
  });
}

void SimNode::post(const std::string& target, const json& body, std::function<void(int, const std::string&)> done) {
  req_ = {};
  req_.method(http::verb::post);
  req_.target(target);
  req_.version(11);
  req_.set(http::field::host, s_.o.host);
  req_.set(http::field::content_type, "application/json");
  req_.body() = body.dump();
  for (const auto& [name, value] : protocol::sign_request(id_, "POST", target, req_.body(), platform::unix_time_ms()))
    req_.set(name, value);
  req_.keep_alive(true);
  req_.prepare_payload();
  http::async_write(socket_, req_, [self = shared_from_this(), done = std::move(done)](error_code ec, size_t) mutable {
    if (ec) return self->failed("sending: " + ec.message());
    self->res_ = {};
    http::async_read(self->socket_, self->buf_, self->res_, [self, done = std::move(done)](error_code e, size_t) {
      if (e) return self->failed("reading: " + e.message());
      done(static_cast<int>(self->res_.result_int()), self->res_.body());
    });
  });
}

void SimNode::do_register() {
  post(protocol::kRegisterPath, protocol::to_json(describe(id_, index_, worker_)),
       [self = shared_from_this()](int status, const std::string& body) {
         if (status != 200) return self->failed("registering: HTTP " + std::to_string(status) + " " + body.substr(0, 200));
         if (!self->registered_) {
           self->registered_ = true;
           self->s_.registered_one();
         }
         self->poll();
       });
}

void SimNode::poll() {
  if (!polling_) ++s_.polling;
  polling_ = true;
  post(protocol::kWorkPath, {{"wait", s_.o.poll_wait_s}}, [self = shared_from_this()](int status, const std::string& body) {
    self->polling_ = false;
    --self->s_.polling;
    if (status == 204) return self->poll();
    if (status != 200) return self->failed("polling: HTTP " + std::to_string(status) + " " + body.substr(0, 200));
    try {
      self->answer(protocol::work_from_json(json::parse(body)));
    } catch (const std::exception& e) {
      self->failed(std::string("reading its work: ") + e.what());
    }
  });
}

void SimNode::answer(const protocol::Work& w) {
  const std::string job = "/v1/node/jobs/" + w.job_id;
  const json chunk = {{"attempt", w.attempt},
                      {"chunks", {{{"index", static_cast<int64_t>(w.output.size())}, {"text", kWorkerText}, {"tokens", {1}}}}}};
  post(job + "/output", chunk, [self = shared_from_this(), job, attempt = w.attempt](int status, const std::string& body) {
    if (status != 200) return self->failed("output: HTTP " + std::to_string(status) + " " + body.substr(0, 200));
    self->post(job + "/complete",
               {{"attempt", attempt}, {"prompt_tokens", 1}, {"completion_tokens", 1}, {"finish_reason", "stop"}},
               [self](int st, const std::string& b) {
                 if (st != 200) return self->failed("complete: HTTP " + std::to_string(st) + " " + b.substr(0, 200));
                 self->poll();
               });
  });
}

void SimNode::failed(const std::string& what) {
  if (polling_) {
    polling_ = false;
    --s_.polling;
  }
  s_.note_error("node " + std::to_string(index_) + ": " + what);
  // Start over on a new connection a moment later (a refused registration is tried again too).
  retry_.expires_after(std::chrono::seconds(1));
  retry_.async_wait([self = shared_from_this()](error_code) {
    self->buf_.clear();
    self->connect_then([self] {
      if (self->registered_) self->poll();
      else self->do_register();
    });
  });
}

Chatter::Chatter(Swarm& s) : s_(s), socket_(s.ioc) {}

void Chatter::next() {
  if (done_ >= s_.o.chats) {
    s_.ioc.stop();
    return;
  }
  auto send = [self = shared_from_this()] {
    auto& r = self->req_;
    r = {};
    r.method(http::verb::post);
    r.target("/v1/chat/completions");
    r.version(11);
    r.set(http::field::host, self->s_.o.host);
    r.set(http::field::content_type, "application/json");
    r.set(http::field::authorization, "Bearer " + self->s_.o.api_key);
    r.body() = json{{"model", kChatModel},
                    {"messages", {{{"role", "user"}, {"content", "hello " + std::to_string(self->done_)}}}},
                    {"max_tokens", 4},
                    {"stream", true}}
                   .dump();
    r.keep_alive(true);
    r.prepare_payload();
    self->got_first_ = false;
    self->parser_.emplace();
    self->parser_->body_limit(1u << 20);
    self->sent_ = Clock::now();
    http::async_write(self->socket_, r, [self](error_code ec, size_t) {
      if (ec) {
        self->s_.note_error("chat: sending: " + ec.message());
        self->socket_.close(ec);
        ++self->done_;
        return self->next();
      }
      self->read_more();
    });
  };
  if (socket_.is_open()) return send();
  socket_.async_connect(s_.server, [self = shared_from_this(), send](error_code ec) {
    if (ec) {
      self->s_.note_error("chat: connecting: " + ec.message());
      ++self->done_;
      return self->next();
    }
    send();
  });
}

void Chatter::read_more() {
  http::async_read_some(socket_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
    auto& p = *self->parser_;
    const std::string& body = p.get().body();
    if (!self->got_first_ && body.find(kWorkerText) != std::string::npos) {
      self->got_first_ = true;
      self->s_.report.ttft_ms.push_back(ms_since(self->sent_));
    }
    if (ec || p.is_done()) {
      if (ec) self->s_.note_error("chat " + std::to_string(self->done_) + ": " + ec.message());
      else if (p.get().result_int() != 200)
        self->s_.note_error("chat " + std::to_string(self->done_) + ": HTTP " + std::to_string(p.get().result_int()) + " " +
                            body.substr(0, 200));
      else if (self->got_first_ && body.find("[DONE]") != std::string::npos) {
        ++self->s_.report.chats_ok;
        self->s_.report.total_ms.push_back(ms_since(self->sent_));
      }
      if (ec || !p.keep_alive()) {
        error_code ignored;
        self->socket_.close(ignored);
        self->buf_.clear();
      }
      ++self->done_;
      self->s_.last_progress = Clock::now();
      return self->next();
    }
    self->read_more();
  });
}

void Swarm::tick() {
  ticker.expires_after(std::chrono::milliseconds(100));
  ticker.async_wait([this](error_code) {
    const int everyone = static_cast<int>(nodes.size());
    if (!chats_started && report.registered == everyone && polling == everyone) {
      if (report.setup_s == 0) {
        report.setup_s = std::chrono::duration<double>(Clock::now() - began).count();
        if (progress)
          progress("all " + std::to_string(everyone) + " nodes polling after " + std::to_string(report.setup_s) + " s");
      }
      if (std::chrono::duration<double>(Clock::now() - began).count() >= report.setup_s + o.settle_s) {
        chats_started = true;
        report.polling = polling;
        std::make_shared<Chatter>(*this)->start();
      }
    }
    if (Clock::now() - last_progress > std::chrono::seconds(60)) {
      if (progress) progress("no progress for 60 s: giving up");
      ioc.stop();
      return;
    }
    tick();
  });
}

}  // namespace

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

SwarmReport run_swarm(const SwarmOptions& o, const std::function<void(const std::string&)>& progress) {
  const uint64_t descriptors = platform::raise_open_file_limit();
  if (descriptors < static_cast<uint64_t>(o.nodes + o.workers) + 64)
    throw Error(std::to_string(o.nodes + o.workers) + " nodes need as many open files, and this process may open " +
                std::to_string(descriptors) + " (raise `ulimit -n`)");
  Swarm s;
  s.o = o;
  s.progress = progress;
  s.server = tcp::endpoint(net::ip::make_address(o.host), static_cast<unsigned short>(o.port));
  const int total = o.nodes + o.workers;
  s.nodes.reserve(static_cast<size_t>(total));
  // Workers first: the chat model has holders before any idle node registers.
  for (int i = 0; i < total; ++i) s.nodes.push_back(std::make_shared<SimNode>(s, i, i < o.workers));
  if (progress) progress(std::to_string(total) + " node keys made; registering");
  s.began = s.last_progress = Clock::now();
  s.launch();
  s.tick();
  s.ioc.run();
  return s.report;
}

}  // namespace orchard::node
