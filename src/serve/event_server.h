#pragma once
// An HTTP/1.1 server on an event loop (Boost.Asio; requests parsed by Beast). A connection costs
// a few kilobytes and no thread, so one coordinator holds tens of thousands of node long-polls on
// a small machine, where cpp-httplib's server gives every open connection a thread.
//
// Handlers keep cpp-httplib's Request and Response shapes, so routes move between the two
// servers unchanged. They run on a small worker pool (they take locks and touch files); an
// answer streamed through a chunked content provider runs on a thread of its own while it lasts
// (there are as many as running jobs, not as many as nodes); and a deferred route may park its
// request with no thread at all until someone answers it (a long-poll waiting for work).
#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "serve/tls_server.h"

namespace orchard::serve {

// The answer to one parked request: given once, from any thread. Until answered it holds its
// connection: answer (or let go of) every Reply before the server is destroyed.
class Reply {
 public:
  virtual ~Reply() = default;
  // Sends `res` (a plain body, no content provider). false when an answer was given already or
  // the client left. `on_lost` runs (on a worker) when the answer could not be written.
  virtual bool send(httplib::Response res, std::function<void()> on_lost = {}) = 0;
  // Whether the client closed its connection while the request was parked.
  virtual bool gone() const = 0;
  // `f` runs once if the client leaves before an answer (at once if it has left already). It
  // runs on an event thread: it must not block.
  virtual void on_hang_up(std::function<void()> f) = 0;
};
using ReplyPtr = std::shared_ptr<Reply>;

// A route that may answer later: it fills `res` to answer now, or leaves it untouched (no
// status, header or body set) and keeps `reply` to answer through it.
using DeferredHandler = std::function<void(const httplib::Request&, httplib::Response& res, const ReplyPtr& reply)>;
using PlainHandler = std::function<void(const httplib::Request&, httplib::Response&)>;
using Logger = std::function<void(const httplib::Request&, const httplib::Response&)>;

struct EventServerOptions {
  TlsFiles tls;                                 // both set: HTTPS
  size_t max_body_bytes = 8u << 20;             // larger: 413
  size_t max_header_bytes = 64u << 10;          // larger: 431
  int workers = 8;                              // threads running handlers
  int event_threads = 0;                        // 0: one per core, at most two
  std::chrono::seconds read_timeout{60};        // to read a request, and a kept-alive connection's idle time
  std::chrono::seconds write_timeout{30};       // to write an answer (or one piece of a stream)
  int backlog = 4096;
};

class EventServer {
 public:
  // Throws orchard::Error naming the files when TLS cannot use them.
  explicit EventServer(EventServerOptions options);
  ~EventServer();
  EventServer(const EventServer&) = delete;
  EventServer& operator=(const EventServer&) = delete;

  // Routes: the path (decoded, no query) must match `pattern` (std::regex) whole; its groups are
  // the request's `matches`. The first route added that matches is the one run.
  void Get(const std::string& pattern, PlainHandler h);
  void Post(const std::string& pattern, PlainHandler h);
  void Delete(const std::string& pattern, PlainHandler h);
  // A route whose handler may wait a long time (a whole generation before answering): it runs
  // on a thread of its own, so it never holds a pool worker that other requests need.
  void post_blocking(const std::string& pattern, PlainHandler h);
  void post_deferred(const std::string& pattern, DeferredHandler h);
  // Runs for every answer of status 400 or more with an empty body (no route: 404, too large:
  // 413, malformed: 400), to give it a body.
  void set_error_handler(PlainHandler h);
  void set_logger(Logger l);

  // Listens on host:port (0: any free port) and returns the port; throws orchard::Error naming
  // the address when it cannot.
  int bind(const std::string& host, int port);
  // Serves until stop(); returns once every connection is closed and every handler returned.
  void run();
  // Asks run() to return: only sets a flag, so a signal handler may call it. Streams still open
  // get a few seconds to end.
  void stop();
  bool is_running() const;
  // Connections open now (accepted and not yet closed).
  size_t connections() const;

  struct Core;

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace orchard::serve
