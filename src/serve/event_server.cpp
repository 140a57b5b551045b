#include "serve/event_server.h"

#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it (Boost 1.74)

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>
#include <vector>

#include "platform/platform.h"
#include "serve/http_target.h"
#include "tensor/error.h"

namespace orchard::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

struct Route {
  std::string method;
  std::regex pattern;
  PlainHandler plain;
  DeferredHandler deferred;
  bool own_thread = false;  // may wait a long time (a whole generation): not on the pool
};

// Longer targets are refused (414) before routing: std::regex recurses per character.
constexpr size_t kMaxTargetBytes = 8192;

std::string chunk(const char* data, size_t n) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", n);
  std::string out = size;
  out.append(data, n);
  out += "\r\n";
  return out;
}

}  // namespace

class Exchange;

// What an Exchange needs of its connection, whatever the connection's stream type.
class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  // Each on the session's strand (they post there themselves).
  virtual void respond(std::shared_ptr<Exchange> x, std::shared_ptr<httplib::Response> res,
                       std::function<void()> on_lost) = 0;
  virtual void park(std::shared_ptr<Exchange> x) = 0;
  virtual void stream_ended(bool keep_alive) = 0;
  // For a streamed answer's thread: writes `data` and waits; false when it failed or timed out.
  virtual bool write_blocking(std::shared_ptr<std::string> data) = 0;
  // Whether the client closed its side (so the next write cannot reach it): the stream's check
  // before each piece, as a client leaving mid-answer cancels the generation behind it.
  virtual bool peer_closed() = 0;
};

struct Life {
  std::mutex mu;
  EventServer::Core* core = nullptr;  // null once the server is gone: replies then go nowhere
};

// One request and its answer.
class Exchange final : public Reply, public std::enable_shared_from_this<Exchange> {
 public:
  enum State { Open, Answered, Gone };

  httplib::Request req;  // never moved once routed: `req.matches` points into `req.path`
  bool keep_alive = false;
  std::shared_ptr<Life> life;
  std::atomic<int> state{Open};

  bool send(httplib::Response res, std::function<void()> on_lost) override;
  bool gone() const override { return state.load() == Gone; }
  void on_hang_up(std::function<void()> f) override {
    std::unique_lock lock(mu_);
    if (state.load() == Gone) {
      lock.unlock();
      if (f) f();
      return;
    }
    hang_up_ = std::move(f);
  }
  // The connection closed while parked: Gone, and the hang-up callback runs (unless answered).
  bool hung_up() {
    int open = Open;
    if (!state.compare_exchange_strong(open, Gone)) return false;
    std::function<void()> f;
    std::shared_ptr<SessionBase> s;
    {
      std::lock_guard lock(mu_);
      f.swap(hang_up_);
      s.swap(session_);
    }
    if (f) f();
    return true;
  }
  bool claim() {
    int open = Open;
    return state.compare_exchange_strong(open, Answered);
  }

  // The connection is held while the request is open, and let go once it is answered or its
  // client left: a Reply kept longer holds no socket (which must not outlive the event loop).
  void set_session(std::shared_ptr<SessionBase> s) {
    std::lock_guard lock(mu_);
    session_ = std::move(s);
  }
  std::shared_ptr<SessionBase> session() {
    std::lock_guard lock(mu_);
    return session_;
  }
  std::shared_ptr<SessionBase> release_session() {
    std::lock_guard lock(mu_);
    return std::move(session_);
  }

 private:
  std::mutex mu_;
  std::function<void()> hang_up_;
  std::shared_ptr<SessionBase> session_;
};

struct EventServer::Core {
  explicit Core(EventServerOptions o);
  ~Core();

  // Declared before the event loop, so they outlive it: the loop's pending handlers hold
  // sessions, whose destructors count themselves out and whose TLS streams use the context.
  EventServerOptions opts;
  std::optional<ssl::context> tls;
  std::vector<Route> routes;
  PlainHandler error_handler;
  Logger logger;
  std::shared_ptr<Life> life = std::make_shared<Life>();
  std::atomic<bool> stop_requested{false}, stopping_hard{false}, running{false};
  std::chrono::steady_clock::time_point stop_began{};
  std::atomic<size_t> open_connections{0};
  std::mutex streams_mu;
  std::condition_variable streams_cv;
  size_t streams = 0;  // threads writing a streamed answer

  net::io_context ioc;
  // The acceptor and the timers that close it share one strand: two event threads never touch
  // them at once.
  net::strand<net::io_context::executor_type> control = net::make_strand(ioc);
  tcp::acceptor acceptor{control};
  net::steady_timer ticker{control}, accept_pause{control};
  net::thread_pool workers;  // last: joined first, while the loop still exists for what they post

  void accept();
  void tick();
  void dispatch(std::shared_ptr<Exchange> x);
  void run_handler(const std::shared_ptr<Exchange>& x, const Route* route);
  void answer(const std::shared_ptr<Exchange>& x, std::shared_ptr<httplib::Response> res, std::function<void()> on_lost);
  void stream(std::shared_ptr<SessionBase> s, std::shared_ptr<Exchange> x, std::shared_ptr<httplib::Response> res);
  // Runs `f` on a thread of its own, counted in `streams` (waited for at the end); false (and
  // `f` not run) once the server is stopping for good.
  bool spawn(std::function<void()> f);
  void wait_for_streams(std::chrono::milliseconds at_most);
  template <class F>
  void on_worker(F f) {
    net::post(workers, std::move(f));
  }
};

bool Exchange::send(httplib::Response res, std::function<void()> on_lost) {
  if (!claim()) return false;
  std::lock_guard lock(life->mu);
  if (!life->core) {
    release_session();  // the server is gone: let go of the connection now
    return false;
  }
  life->core->answer(shared_from_this(), std::make_shared<httplib::Response>(std::move(res)), std::move(on_lost));
  return true;
}

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// One connection: reads a request, hands it to the core, writes the answer, and again while the
// client keeps the connection alive. Everything it does runs on its strand.
template <class Stream>
class Session final : public SessionBase {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Session(EventServer::Core& core, Stream stream) : core_(core), stream_(std::move(stream)) {
    ++core_.open_connections;
    error_code ec;
    const tcp::endpoint peer = lowest().socket().remote_endpoint(ec);
    if (!ec) {
      remote_addr_ = peer.address().to_string();
      remote_port_ = peer.port();
    }
  }
  ~Session() override { --core_.open_connections; }

  void start() {
    if constexpr (kTls) {
      lowest().expires_after(core_.opts.read_timeout);
      stream_.async_handshake(ssl::stream_base::server, [self = me()](error_code ec) {
        if (ec) return self->close();
        self->read_request();
      });
    } else {
      read_request();
    }
  }

  void respond(std::shared_ptr<Exchange> x, std::shared_ptr<httplib::Response> res,
               std::function<void()> on_lost) override {
    net::post(stream_.get_executor(), [self = me(), x = std::move(x), res = std::move(res),
                                       on_lost = std::move(on_lost)]() mutable {
      self->write_response(*x, *res, std::move(on_lost));
    });
  }

  void park(std::shared_ptr<Exchange> x) override {
    net::post(stream_.get_executor(), [self = me(), x = std::move(x)] {
      if (x->state.load() != Exchange::Open) return;  // answered already: its write came first
      self->watching_ = true;
      self->watch(std::move(x));
    });
  }

  void stream_ended(bool keep_alive) override {
    net::post(stream_.get_executor(), [self = me(), keep_alive] {
      if (keep_alive) self->read_request();
      else self->close();
    });
  }

  bool peer_closed() override { return platform::peer_closed(lowest().socket().native_handle()); }

  bool write_blocking(std::shared_ptr<std::string> data) override {
    auto done = std::make_shared<std::promise<bool>>();
    std::future<bool> result = done->get_future();
    net::post(stream_.get_executor(), [self = me(), data, done] {
      self->lowest().expires_after(self->core_.opts.write_timeout);
      net::async_write(self->stream_, net::buffer(*data),
                       [self, data, done](error_code ec, size_t) { done->set_value(!ec); });
    });
    while (result.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready)
      if (core_.stopping_hard) return false;
    try {
      return result.get();
    } catch (const std::future_error&) {
      return false;  // the loop went away with the write
    }
  }

 private:
  std::shared_ptr<Session> me() { return std::static_pointer_cast<Session>(shared_from_this()); }
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // Waits for the parked request's client to close. The event loop may report readiness that is
  // not there (any event on the socket ends a wait), so the socket itself is asked: closed, or
  // sent more while waiting (HTTP does not allow it) — either way nobody will read this answer.
  void watch(std::shared_ptr<Exchange> x) {
    lowest().socket().async_wait(tcp::socket::wait_read, [self = me(), x](error_code ec) {
      if (ec == net::error::operation_aborted || !self->watching_) return;  // answered
      if (!ec && !self->peer_closed() && !self->has_unread_data()) return self->watch(x);
      self->watching_ = false;
      if (x->hung_up()) self->close();
    });
  }

  bool has_unread_data() {
    error_code ec;
    return lowest().socket().available(ec) > 0 || ec;
  }

  void read_request() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(core_.opts.max_header_bytes));
    parser_->body_limit(core_.opts.max_body_bytes);
    lowest().expires_after(core_.opts.read_timeout);
    http::async_read_header(stream_, buffer_, *parser_, [self = me()](error_code ec, size_t) {
      if (ec) return self->read_failed(ec);
      // curl and others wait a second for this before sending a larger body.
      if (self->parser_->get().version() >= 11 &&
          beast::iequals(self->parser_->get()[http::field::expect], "100-continue")) {
        net::async_write(self->stream_, net::buffer(kContinue.data(), kContinue.size()), [self](error_code ec2, size_t) {
          if (ec2) return self->close();
          self->read_body();
        });
        return;
      }
      self->read_body();
    });
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_, [self = me()](error_code ec, size_t) {
      if (ec) return self->read_failed(ec);
      self->lowest().expires_never();
      self->core_.dispatch(self->exchange_of(self->parser_->release()));
    });
  }

  std::shared_ptr<Exchange> exchange_of(http::request<http::string_body> m) {
    auto x = std::make_shared<Exchange>();
    httplib::Request& r = x->req;
    r.method = std::string(m.method_string());
    r.version = m.version() == 10 ? "HTTP/1.0" : "HTTP/1.1";
    set_target(r, std::string_view(m.target().data(), m.target().size()));
    for (const auto& f : m) r.headers.emplace(std::string(f.name_string()), std::string(f.value()));
    r.body = std::move(m.body());
    r.remote_addr = remote_addr_;
    r.remote_port = remote_port_;
    x->keep_alive = m.keep_alive();
    x->set_session(shared_from_this());
    x->life = core_.life;
    return x;
  }

  // A read that ended without a request: the client left or idled (close), or sent something
  // this server will not take (an error answer, then close).
  void read_failed(error_code ec) {
    int status = 0;
    if (ec == http::error::body_limit) status = 413;
    else if (ec == http::error::header_limit) status = 431;
    else if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
             ec != http::error::end_of_stream && ec != http::error::partial_message)
      status = 400;  // malformed
    if (status == 0) return close();
    auto x = std::make_shared<Exchange>();
    x->set_session(shared_from_this());
    x->life = core_.life;
    x->state = Exchange::Answered;
    auto res = std::make_shared<httplib::Response>();
    res->status = status;
    core_.answer(x, res, {});
  }

  void write_response(Exchange& x, httplib::Response& res, std::function<void()> on_lost) {
    if (watching_) {  // the parked request's hang-up watch
      watching_ = false;
      error_code ignored;
      lowest().socket().cancel(ignored);
    }
    auto msg = std::make_shared<http::response<http::string_body>>();
    msg->version(11);
    const int status = res.status >= 100 && res.status <= 599 ? res.status : 500;
    if (status < 200 || status == 204 || status == 304) res.body.clear();  // no body allowed
    msg->result(static_cast<unsigned>(status));
    for (const auto& [name, value] : res.headers) msg->insert(name, value);
    msg->body() = std::move(res.body);
    msg->keep_alive(x.keep_alive && !core_.stop_requested);
    msg->prepare_payload();
    lowest().expires_after(core_.opts.write_timeout);
    http::async_write(stream_, *msg, [self = me(), msg, on_lost = std::move(on_lost)](error_code ec, size_t) mutable {
      if (ec) {
        if (on_lost) self->core_.on_worker(std::move(on_lost));
        return self->close();
      }
      if (msg->keep_alive()) self->read_request();
      else self->close();
    });
  }

  void close() {
    watching_ = false;
    error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().close();
  }

  EventServer::Core& core_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool watching_ = false;
  std::string remote_addr_;
  int remote_port_ = 0;
};

using PlainSession = Session<beast::tcp_stream>;
using TlsSession = Session<beast::ssl_stream<beast::tcp_stream>>;

}  // namespace

EventServer::Core::Core(EventServerOptions o)
    : opts(std::move(o)), workers(static_cast<size_t>(std::max(1, opts.workers))) {
  if (!opts.tls.enabled()) return;
  const TlsFiles& f = opts.tls;
  check_tls_files(f);
  tls.emplace(ssl::context::tls_server);
  try {
    tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                     ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    tls->use_certificate_chain_file(f.cert);
    tls->use_private_key_file(f.key, ssl::context::pem);
  } catch (const boost::system::system_error& e) {
    throw Error("TLS: OpenSSL cannot use the certificate " + f.cert + " with the key " + f.key + " (" + e.what() + ")");
  }
  if (SSL_CTX_check_private_key(tls->native_handle()) != 1)
    throw Error("TLS: OpenSSL cannot use the certificate " + f.cert + " with the key " + f.key + " (the key is not the certificate's)");
}

EventServer::Core::~Core() {
  // Handlers first (one may still start a thread), then the threads, then the loop.
  stopping_hard = true;
  workers.stop();
  workers.join();
  wait_for_streams(std::chrono::milliseconds(10'000));
}

bool EventServer::Core::spawn(std::function<void()> f) {
  {
    std::lock_guard lock(streams_mu);
    if (stopping_hard) return false;
    ++streams;
  }
  try {
    std::thread([this, f = std::move(f)]() mutable {
      try {
        f();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "http: %s\n", e.what());
      }
      f = nullptr;  // what it holds goes before the count drops: the server may go right after
      std::lock_guard lock(streams_mu);
      --streams;
      streams_cv.notify_all();
    }).detach();
  } catch (const std::system_error&) {
    std::lock_guard lock(streams_mu);
    --streams;
    streams_cv.notify_all();
    return false;
  }
  return true;
}

void EventServer::Core::wait_for_streams(std::chrono::milliseconds at_most) {
  std::unique_lock lock(streams_mu);
  streams_cv.wait_for(lock, at_most, [&] { return streams == 0; });
}

void EventServer::Core::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec) {
      if (!acceptor.is_open() || ec == net::error::operation_aborted) return;
      // Out of descriptors (or memory): the connections waiting in the backlog wait a moment
      // instead of spinning this thread.
      static std::atomic<int64_t> last_logged{0};
      const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::steady_clock::now().time_since_epoch()).count();
      if (last_logged.exchange(now_s) != now_s)
        std::fprintf(stderr, "http: cannot accept a connection: %s (%zu open)\n", ec.message().c_str(),
                     open_connections.load());
      accept_pause.expires_after(std::chrono::milliseconds(100));
      accept_pause.async_wait([this](error_code) {
        if (acceptor.is_open()) accept();
      });
      return;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // streams are many small writes
    if (tls)
      std::make_shared<TlsSession>(*this, beast::ssl_stream<beast::tcp_stream>(std::move(socket), *tls))->start();
    else
      std::make_shared<PlainSession>(*this, beast::tcp_stream(std::move(socket)))->start();
    accept();
  });
}

void EventServer::Core::tick() {
  ticker.expires_after(std::chrono::milliseconds(50));
  ticker.async_wait([this](error_code) {
    if (stop_requested && acceptor.is_open()) {
      error_code ignored;
      acceptor.close(ignored);
      accept_pause.cancel();
      stop_began = std::chrono::steady_clock::now();
    }
    if (stop_requested) {
      size_t open_streams;
      {
        std::lock_guard lock(streams_mu);
        open_streams = streams;
      }
      if (open_streams == 0 || std::chrono::steady_clock::now() - stop_began > std::chrono::seconds(5)) {
        stopping_hard = true;
        ioc.stop();
        return;
      }
    }
    tick();
  });
}

void EventServer::Core::dispatch(std::shared_ptr<Exchange> x) {
  auto refuse = [&](int status) {
    x->claim();
    auto res = std::make_shared<httplib::Response>();
    res->status = status;
    answer(x, res, {});
  };
  if (x->req.target.size() > kMaxTargetBytes) return refuse(414);
  for (const Route& r : routes)
    if (r.method == x->req.method && std::regex_match(x->req.path, x->req.matches, r.pattern)) {
      const Route* route = &r;
      if (!route->own_thread) return on_worker([this, x, route] { run_handler(x, route); });
      if (!spawn([this, x, route] { run_handler(x, route); })) refuse(503);
      return;
    }
  refuse(404);
}

void EventServer::Core::run_handler(const std::shared_ptr<Exchange>& x, const Route* route) {
  auto res = std::make_shared<httplib::Response>();
  try {
    if (route->deferred) route->deferred(x->req, *res, x);
    else route->plain(x->req, *res);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http: %s %s: %s\n", x->req.method.c_str(), x->req.path.c_str(), e.what());
    res = std::make_shared<httplib::Response>();
    res->status = 500;
  }
  const bool untouched = res->status == -1 && res->body.empty() && res->headers.empty() && !res->content_provider_;
  if (route->deferred && untouched) {
    if (auto s = x->session()) s->park(x);  // waits for its Reply (or answered through it already)
    return;
  }
  if (!x->claim()) return;  // answered through the reply already
  try {
    answer(x, std::move(res), {});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http: answering %s %s: %s\n", x->req.method.c_str(), x->req.path.c_str(), e.what());
  }
}

void EventServer::Core::answer(const std::shared_ptr<Exchange>& x, std::shared_ptr<httplib::Response> res,
                               std::function<void()> on_lost) {
  if (res->status == -1) res->status = 200;
  if (res->status >= 400 && res->body.empty() && !res->content_provider_ && error_handler) error_handler(x->req, *res);
  if (logger) logger(x->req, *res);
  std::shared_ptr<SessionBase> s = x->release_session();
  if (!s) {
    if (on_lost) on_worker(std::move(on_lost));
    return;
  }
  if (res->content_provider_) return stream(std::move(s), x, std::move(res));
  s->respond(x, std::move(res), std::move(on_lost));
}

// A chunked answer: the content provider blocks between pieces (it waits for tokens), so it
// gets a thread of its own; each piece is written by the session's strand while it waits.
void EventServer::Core::stream(std::shared_ptr<SessionBase> s, std::shared_ptr<Exchange> x,
                               std::shared_ptr<httplib::Response> res) {
  auto session = s;
  const bool started = spawn([this, s = std::move(s), x = std::move(x), res = std::move(res)]() mutable {
    const int status = res->status;
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " +
                       std::string(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)))) + "\r\n";
    for (const auto& [name, value] : res->headers) head += name + ": " + value + "\r\n";
    const bool keep_alive = x->keep_alive && !stop_requested;
    head += keep_alive ? "Transfer-Encoding: chunked\r\n\r\n" : "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    bool ok = s->write_blocking(std::make_shared<std::string>(std::move(head)));
    bool done = false;
    size_t offset = 0;
    {
      httplib::DataSink sink;
      sink.write = [&](const char* data, size_t n) {
        if (ok && s->peer_closed()) ok = false;
        if (ok && n > 0) ok = s->write_blocking(std::make_shared<std::string>(chunk(data, n)));
        offset += n;
        return ok;
      };
      sink.is_writable = [&] { return ok && !s->peer_closed(); };
      sink.done = [&] { done = true; };
      while (ok && !done)
        try {
        if (!res->content_provider_(offset, 0, sink)) ok = false;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "http: a streamed answer failed: %s\n", e.what());
        ok = false;
      }
    }
    if (ok) ok = s->write_blocking(std::make_shared<std::string>("0\r\n\r\n"));
    res->content_provider_success_ = ok;
    s->stream_ended(ok && keep_alive);
  });
  if (!started) session->stream_ended(false);  // stopping: the connection closes
}

EventServer::EventServer(EventServerOptions options) : core_(std::make_unique<Core>(std::move(options))) {
  std::lock_guard lock(core_->life->mu);
  core_->life->core = core_.get();
}

EventServer::~EventServer() {
  stop();
  {
    std::lock_guard lock(core_->life->mu);
    core_->life->core = nullptr;
  }
  core_.reset();
}

void EventServer::Get(const std::string& pattern, PlainHandler h) {
  core_->routes.push_back({"GET", std::regex(pattern), std::move(h), {}});
}
void EventServer::Post(const std::string& pattern, PlainHandler h) {
  core_->routes.push_back({"POST", std::regex(pattern), std::move(h), {}});
}
void EventServer::Delete(const std::string& pattern, PlainHandler h) {
  core_->routes.push_back({"DELETE", std::regex(pattern), std::move(h), {}});
}
void EventServer::post_blocking(const std::string& pattern, PlainHandler h) {
  core_->routes.push_back({"POST", std::regex(pattern), std::move(h), {}, true});
}
void EventServer::post_deferred(const std::string& pattern, DeferredHandler h) {
  core_->routes.push_back({"POST", std::regex(pattern), {}, std::move(h)});
}
void EventServer::set_error_handler(PlainHandler h) { core_->error_handler = std::move(h); }
void EventServer::set_logger(Logger l) { core_->logger = std::move(l); }

int EventServer::bind(const std::string& host, int port) {
  platform::raise_open_file_limit();
  Core& c = *core_;
  const std::string where = host + ":" + std::to_string(port);
  try {
    tcp::resolver resolver(c.ioc);
    const auto found = resolver.resolve(host, std::to_string(port), tcp::resolver::passive | tcp::resolver::numeric_service);
    if (found.empty()) throw Error("cannot listen on " + where + ": the address resolves to nothing");
    const tcp::endpoint ep = *found.begin();
    c.acceptor.open(ep.protocol());
    c.acceptor.set_option(tcp::acceptor::reuse_address(true));
    c.acceptor.bind(ep);
    c.acceptor.listen(c.opts.backlog);
    return c.acceptor.local_endpoint().port();
  } catch (const boost::system::system_error& e) {
    error_code ignored;
    c.acceptor.close(ignored);
    throw Error("cannot listen on " + where + ": " + e.code().message() +
                " (is the port in use, or the address not this machine's?)");
  }
}

void EventServer::run() {
  Core& c = *core_;
  if (!c.acceptor.is_open()) throw Error("the HTTP server was not bound to an address (bind() first)");
  c.running = true;
  c.accept();
  c.tick();
  unsigned n = c.opts.event_threads > 0 ? static_cast<unsigned>(c.opts.event_threads)
                                        : std::clamp(std::thread::hardware_concurrency(), 1u, 2u);
  // A handler that throws on the loop is logged and the loop goes on.
  auto loop = [&c] {
    for (;;) {
      try {
        c.ioc.run();
        return;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "http: %s\n", e.what());
      }
    }
  };
  std::vector<std::thread> extra;
  for (unsigned i = 1; i < n; ++i) extra.emplace_back(loop);
  loop();
  for (std::thread& t : extra) t.join();
  c.wait_for_streams(std::chrono::milliseconds(10'000));
  c.running = false;
}

void EventServer::stop() { core_->stop_requested = true; }
bool EventServer::is_running() const { return core_->running; }
size_t EventServer::connections() const { return core_->open_connections; }

}  // namespace orchard::serve
