// The event-driven HTTP server (serve/event_server.h) against a real client (cpp-httplib's) and
// raw sockets: routes and their groups, query strings, errors for what it will not take, a
// parked request answered later or noticed hanging up, streamed answers, and — what it exists
// for — far more open, waiting requests than it has threads while other requests still pass.
#include "serve/event_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/http_target.h"
#include "tensor/error.h"

namespace orchard::serve {
namespace {

using namespace std::chrono_literals;

class RunningEventServer {
 public:
  explicit RunningEventServer(EventServerOptions o = {}) : server(std::move(o)) {}
  void start() {
    port = server.bind("127.0.0.1", 0);
    thread = std::thread([this] { server.run(); });
  }
  ~RunningEventServer() {
    server.stop();
    if (thread.joinable()) thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(20, 0);
    return c;
  }
  EventServer server;
  int port = 0;
  std::thread thread;
};

// A raw connection, for what a well-behaved client library will not send.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string exchange_raw(int port, const std::string& request) {
  const int fd = connect_to(port);
  if (fd < 0) return "(no connection)";
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

TEST(EventServer, RoutesByMethodAndPatternWithGroupsQueryAndBody) {
  RunningEventServer r;
  r.server.Get(R"(/items/(\d+))", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content("item " + std::string(req.matches[1]) + " q=" + req.get_param_value("q") + " path=" + req.path,
                    "text/plain");
  });
  r.server.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
    res.status = 201;
    res.set_header("X-Seen", req.get_header_value("X-Mine"));
    res.set_content(req.body, "application/octet-stream");
  });
  r.server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    res.set_content("no " + req.method + " " + req.path, "text/plain");
  });
  r.start();
  auto c = r.client();
  const std::string got = exchange_raw(r.port, "GET /items/%34%32?q=a%20b+c%2B HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), "item 42 q=a b c+ path=/items/42");
  std::string big(3 << 20, 'x');  // large enough that clients ask to continue first
  big[12345] = 'y';
  auto posted = c.Post("/echo", {{"X-Mine", "yes"}}, big, "application/octet-stream");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 201);
  EXPECT_EQ(posted->get_header_value("X-Seen"), "yes");
  EXPECT_EQ(posted->body, big);
  auto wrong_method = c.Post("/items/42", "", "text/plain");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 404);
  EXPECT_EQ(wrong_method->body, "no POST /items/42");
  auto whole_path_only = c.Get("/items/42/more");
  ASSERT_TRUE(whole_path_only);
  EXPECT_EQ(whole_path_only->status, 404);
}

TEST(HttpTarget, DecodesThePathAndQueryAndKeepsMalformedEscapes) {
  httplib::Request r;
  set_target(r, "/a%2Fb+c/%zz%4?x=1+2%3D&&flag&y=%E2%82%AC&x=2");
  EXPECT_EQ(r.target, "/a%2Fb+c/%zz%4?x=1+2%3D&&flag&y=%E2%82%AC&x=2");
  EXPECT_EQ(r.path, "/a/b+c/%zz%4");  // '+' is a space in a query only
  EXPECT_EQ(r.params.count("x"), 2u);
  EXPECT_EQ(r.get_param_value("x", 0), "1 2=");
  EXPECT_EQ(r.get_param_value("x", 1), "2");
  EXPECT_TRUE(r.has_param("flag"));
  EXPECT_EQ(r.get_param_value("flag"), "");
  EXPECT_EQ(r.get_param_value("y"), "\xE2\x82\xAC");
  set_target(r, "/plain");
  EXPECT_EQ(r.path, "/plain");
  EXPECT_TRUE(r.params.empty());
}

TEST(EventServer, KeepsAConnectionAliveAcrossRequestsAndAnswersInOrder) {
  RunningEventServer r;
  std::atomic<int> n{0};
  r.server.Get("/n", [&](const httplib::Request&, httplib::Response& res) { res.set_content(std::to_string(++n), "text/plain"); });
  r.start();
  // Three requests sent at once on one connection (pipelined), the last asking to close.
  const std::string out = exchange_raw(r.port,
                                       "GET /n HTTP/1.1\r\nHost: x\r\n\r\n"
                                       "GET /n HTTP/1.1\r\nHost: x\r\n\r\n"
                                       "GET /n HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  size_t at = 0;
  for (const char* body : {"\r\n\r\n1", "\r\n\r\n2", "\r\n\r\n3"}) {
    at = out.find(body, at);
    ASSERT_NE(at, std::string::npos) << out;
  }
  for (int i = 0; i < 200 && r.server.connections() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(r.server.connections(), 0u);
}

TEST(EventServer, RefusesMalformedOversizedAndUnroutedRequestsWithTheirStatus) {
  EventServerOptions o;
  o.max_body_bytes = 1000;
  RunningEventServer r(o);
  r.server.Post("/x", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
  r.start();
  EXPECT_EQ(exchange_raw(r.port, "BLAH\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(exchange_raw(r.port, "POST /x HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'a')).rfind("HTTP/1.1 413", 0),
            0u);
  EXPECT_EQ(exchange_raw(r.port, "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  // Still serving after all that.
  auto ok = r.client().Post("/x", "", "text/plain");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->body, "ok");
}

// The point of the server: 600 requests wait at once (as node long-polls do) on 2 worker
// threads, a plain request still passes, and each waiting one gets its own answer.
TEST(EventServer, HoldsManyParkedRequestsOnFewThreadsAndAnswersEach) {
  EventServerOptions o;
  o.workers = 2;
  RunningEventServer r(o);
  std::mutex mu;
  std::vector<std::pair<std::string, ReplyPtr>> parked;
  r.server.post_deferred(R"(/wait/(\d+))", [&](const httplib::Request& req, httplib::Response&, const ReplyPtr& reply) {
    std::lock_guard lock(mu);
    parked.emplace_back(req.matches[1], reply);
  });
  r.server.Get("/ping", [](const httplib::Request&, httplib::Response& res) { res.set_content("pong", "text/plain"); });
  r.start();
  constexpr int kWaiting = 600;
  std::vector<int> fds;
  for (int i = 0; i < kWaiting; ++i) {
    const int fd = connect_to(r.port);
    ASSERT_GE(fd, 0);
    const std::string req = "POST /wait/" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    fds.push_back(fd);
  }
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(mu);
      if (parked.size() == kWaiting) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(parked.size(), static_cast<size_t>(kWaiting));
  auto ping = r.client().Get("/ping");
  ASSERT_TRUE(ping);
  EXPECT_EQ(ping->body, "pong");
  EXPECT_GE(r.server.connections(), static_cast<size_t>(kWaiting));
  // Answered from another thread, each with its own number.
  std::thread([&] {
    for (auto& [id, reply] : parked) {
      httplib::Response res;
      res.set_content("for " + id, "text/plain");
      EXPECT_TRUE(reply->send(std::move(res)));
      EXPECT_FALSE(reply->send(httplib::Response())) << "answered twice";
    }
  }).join();
  for (int i = 0; i < kWaiting; ++i) {
    std::string got;
    char buf[1024];
    while (got.find("for ") == std::string::npos || got.size() < got.find("for ") + 4 + std::to_string(i).size()) {
      const ssize_t n = ::recv(fds[static_cast<size_t>(i)], buf, sizeof buf, 0);
      ASSERT_GT(n, 0) << "request " << i << " got no answer: " << got;
      got.append(buf, static_cast<size_t>(n));
    }
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u);
    EXPECT_EQ(got.substr(got.find("for ")), "for " + std::to_string(i));
    ::close(fds[static_cast<size_t>(i)]);
  }
}

TEST(EventServer, ALongWaitingRouteHoldsNoWorkerAndAVeryLongTargetIsRefused) {
  EventServerOptions o;
  o.workers = 1;
  RunningEventServer r(o);
  std::atomic<bool> release{false};
  r.server.post_blocking("/slow", [&](const httplib::Request&, httplib::Response& res) {
    while (!release) std::this_thread::sleep_for(5ms);
    res.set_content("slow", "text/plain");
  });
  r.server.Get(R"(/fast/([a-z]+))", [](const httplib::Request&, httplib::Response& res) { res.set_content("fast", "text/plain"); });
  r.start();
  std::vector<std::thread> slow;
  for (int i = 0; i < 3; ++i)
    slow.emplace_back([&] {
      auto got = r.client().Post("/slow", "", "text/plain");
      EXPECT_TRUE(got && got->body == "slow");
    });
  std::this_thread::sleep_for(100ms);
  auto fast = r.client().Get("/fast/abc");  // the one worker is free: the slow ones have threads
  ASSERT_TRUE(fast);
  EXPECT_EQ(fast->body, "fast");
  release = true;
  for (auto& t : slow) t.join();
  const std::string huge = exchange_raw(r.port, "GET /fast/" + std::string(20000, 'a') + " HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(huge.rfind("HTTP/1.1 414", 0), 0u) << huge.substr(0, 100);
}

TEST(EventServer, AParkedRequestWhoseClientLeavesIsReportedAndCannotBeAnswered) {
  RunningEventServer r;
  ReplyPtr kept;
  std::atomic<bool> left{false};
  std::atomic<bool> parked{false};
  r.server.post_deferred("/wait", [&](const httplib::Request&, httplib::Response&, const ReplyPtr& reply) {
    kept = reply;
    reply->on_hang_up([&] { left = true; });
    parked = true;
  });
  r.start();
  const int fd = connect_to(r.port);
  const std::string req = "POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  for (int i = 0; i < 500 && !parked; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(parked);
  EXPECT_FALSE(kept->gone());
  ::close(fd);
  for (int i = 0; i < 500 && !left; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(left);
  EXPECT_TRUE(kept->gone());
  EXPECT_FALSE(kept->send(httplib::Response()));
}

TEST(EventServer, AnsweredAtOnceByADeferredRouteOrThroughItsReplyWhileItRuns) {
  RunningEventServer r;
  r.server.post_deferred("/now", [](const httplib::Request&, httplib::Response& res, const ReplyPtr&) {
    res.set_content("now", "text/plain");
  });
  r.server.post_deferred("/inside", [](const httplib::Request&, httplib::Response&, const ReplyPtr& reply) {
    httplib::Response res;
    res.status = 202;
    reply->send(std::move(res));
  });
  r.start();
  auto c = r.client();
  auto now = c.Post("/now", "", "text/plain");
  ASSERT_TRUE(now);
  EXPECT_EQ(now->body, "now");
  auto inside = c.Post("/inside", "", "text/plain");
  ASSERT_TRUE(inside);
  EXPECT_EQ(inside->status, 202);
}

TEST(EventServer, StreamsAChunkedAnswerAndStopsTheProviderWhenTheClientLeaves) {
  RunningEventServer r;
  std::atomic<int> released{-1};
  r.server.Get("/count", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/plain", [n = 0](size_t, httplib::DataSink& sink) mutable {
      const std::string piece = std::to_string(n++) + ",";
      sink.write(piece.data(), piece.size());
      if (n == 5) sink.done();
      return true;
    });
  });
  r.server.Get("/forever", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider(
        "text/plain",
        [](size_t, httplib::DataSink& sink) {
          std::this_thread::sleep_for(20ms);
          return sink.write("x", 1);
        },
        [&](bool success) { released = success ? 1 : 0; });
  });
  r.start();
  auto c = r.client();
  auto counted = c.Get("/count");
  ASSERT_TRUE(counted);
  EXPECT_EQ(counted->body, "0,1,2,3,4,");
  EXPECT_EQ(counted->get_header_value("Transfer-Encoding"), "chunked");
  const int fd = connect_to(r.port);
  const std::string req = "GET /forever HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  char buf[256];
  ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);
  ::close(fd);
  for (int i = 0; i < 500 && released < 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(released, 0) << "the provider was not stopped, or reported success";
}

TEST(EventServer, RefusesHalfTlsSettingsAndAPortInUse) {
  EventServerOptions o;
  o.tls.cert = "/nonexistent.pem";
  try {
    EventServer s(o);
    ADD_FAILURE() << "a certificate without a key was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tls-key"), std::string::npos) << e.what();
  }
  RunningEventServer r;
  r.start();
  EventServer second{EventServerOptions{}};
  try {
    second.bind("127.0.0.1", r.port);
    ADD_FAILURE() << "bound a port in use";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(r.port)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace orchard::serve
