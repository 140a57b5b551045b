#include "serve/server.h"

#include <httplib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "serve/api.h"
#include "serve/secret_compare.h"
#include "serve/http_util.h"

namespace orchard::serve {

extern const char* const kWebPage;

using nlohmann::json;

namespace {

// Metric labels: the routes we serve, everything else as one label (so a scan of random
// paths cannot grow the metrics without bound).
std::string endpoint_label(const std::string& path) {
  static const char* const known[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/messages",
                                      "/api/chat",            "/api/generate",   "/api/tags",  "/api/show",
                                      "/api/version",         "/api/cluster",    "/health",    "/metrics", "/"};
  for (const char* k : known)
    if (path == k) return k;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// httplib's worker pool, its threads at a lower priority than the engine. The engine's step is the
// server's bottleneck; on a machine with few cores, dozens of runnable connection threads
// (each woken per streamed token) otherwise take turns with it on its core, and every
// sequence in the batch waits while they do.
class IoTaskQueue : public httplib::TaskQueue {
 public:
  explicit IoTaskQueue(size_t threads) : pool_(threads) {}
  void enqueue(std::function<void()> fn) override {
    pool_.enqueue([fn = std::move(fn)] {
      lower_this_thread();
      fn();
    });
  }
  void shutdown() override { pool_.shutdown(); }

 private:
  httplib::ThreadPool pool_;
};

}  // namespace

void lower_this_thread() {
  thread_local bool lowered = false;
  if (lowered) return;
  lowered = true;
  // Per thread on Linux (the tid is a process id to setpriority); lowering needs no privilege.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), std::min(19, getpriority(PRIO_PROCESS, 0) + 10));
}

Server::Server(Service& service, ServerOptions options)
    : service_(service), opts_(std::move(options)), http_(make_http_server(opts_.tls)) {
  httplib::Server& h = *http_;
  const int threads = std::max(2, opts_.http_threads);
  h.new_task_queue = [threads] { return new IoTaskQueue(static_cast<size_t>(threads)); };
  h.set_payload_max_length(opts_.max_body_bytes);
  // Streams are many small writes: without this, Nagle's algorithm holds a token back until
  // the client's delayed ACK (~40 ms) arrives.
  h.set_tcp_nodelay(true);
  // Remember the listening socket (see bind()); keep httplib's default of reusable addresses.
  h.set_socket_options([this](socket_t fd) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    listen_fd_ = fd;
  });
  h.set_keep_alive_max_count(1000);
  h.set_read_timeout(30, 0);
  h.set_write_timeout(30, 0);

  // Browsers on other origins (a chat app on another port) may call the API, as with
  // llama.cpp's and Ollama's servers.
  h.set_default_headers({{"Access-Control-Allow-Origin", "*"},
                         {"Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key, anthropic-version"},
                         {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"}});
  h.Options(R"(.*)", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });

  const std::string key = opts_.api_key;
  h.set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
    if (key.empty() || req.method == "OPTIONS" || req.path == "/health" || req.path == "/") return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ", x_api_key = req.get_header_value("x-api-key");
    if ((auth.rfind(bearer, 0) == 0 && same_secret(std::string_view(auth).substr(bearer.size()), key)) ||
        (!x_api_key.empty() && same_secret(x_api_key, key)))
      return httplib::Server::HandlerResponse::Unhandled;
    send_json(res, openai_error(ApiError(401, "invalid_request_error", "missing or wrong API key (send Authorization: Bearer <key>)",
                                         {}, "invalid_api_key")),
              401);
    return httplib::Server::HandlerResponse::Handled;
  });

  h.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    service_.metrics().request(endpoint_label(req.path), res.status);
  });

  // Errors httplib answers itself (no route, body too large) get a JSON body too.
  h.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = "no route " + req.method + " " + req.path;
    if (res.status == 413) msg = "the request body is too large";
    else if (res.status == 405) msg = "method not allowed on " + req.path;
    else if (res.status != 404) msg = "HTTP " + std::to_string(res.status);
    send_json(res, openai_error(ApiError(res.status, "invalid_request_error", msg)), res.status);
  });

  add_openai_routes(h, service_);
  add_ollama_routes(h, service_);
  add_anthropic_routes(h, service_);

  h.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"status", "ok"},
                    {"model", service_.model().id},
                    {"slots", service_.scheduler().slots()},
                    {"active", service_.scheduler().active()},
                    {"waiting", service_.scheduler().waiting()}});
  });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(service_.metrics().render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  h.Get("/api/cluster", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json j = service_.cluster_json();
    if (!opts_.cluster_agent.empty()) {
      // The agent answers on this machine within a second; without it the page still shows the ranks.
      httplib::Client agent("http://" + opts_.cluster_agent);
      agent.set_connection_timeout(1, 0);
      agent.set_read_timeout(1, 0);
      const auto r = agent.Get("/cluster");
      const nlohmann::json d = r && r->status == 200 ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
      j["discovery"] = d.is_object() ? d : nlohmann::json{{"error", "the cluster agent did not answer"}};
    }
    send_json(res, j);
  });
  h.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kWebPage, "text/html; charset=utf-8");
  });
}

Server::~Server() { stop(); }

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

int Server::bind() {
  if (!is_loopback_host(opts_.host) && opts_.api_key.empty() && !opts_.insecure)
    throw Error("listening on " + opts_.host + " without an API key would let anyone who reaches this machine use it: "
                "give --api-key KEY (clients send Authorization: Bearer KEY), or --insecure if that is meant");
  if (opts_.port == 0) {
    port_ = http_->bind_to_any_port(opts_.host);
  } else {
    port_ = http_->bind_to_port(opts_.host, opts_.port) ? opts_.port : -1;
  }
  if (port_ < 0)
    throw Error("cannot listen on " + opts_.host + ":" + std::to_string(opts_.port) +
                " (is the port in use, or the address not this machine's?)");
  // The packaged httplib listens with a backlog of 5: sixteen clients connecting at once then
  // lose SYNs and wait a second for TCP to retry. Listening again only raises the backlog.
  if (listen_fd_ >= 0) ::listen(listen_fd_, 1024);
  return port_;
}

void Server::run() {
  if (port_ < 0) bind();
  http_->listen_after_bind();
}

void Server::stop() {
  if (http_ && http_->is_running()) http_->stop();
}

}  // namespace orchard::serve
