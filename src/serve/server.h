#pragma once
// The HTTP server: every API's routes over one Service, plus /health, /metrics, the cluster
// view (/api/cluster) and the chat page at /.
#include <memory>
#include <string>

#include "serve/tls_server.h"
#include "serve/service.h"

namespace httplib {
class Server;
}

namespace orchard::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;              // 0: any free port (see bound_port)
  int http_threads = 64;        // connections served at once (streams hold one each)
  size_t max_body_bytes = 8u << 20;
  std::string api_key;          // when set, requests need "Authorization: Bearer <key>"
  // bind() refuses an address beyond loopback without api_key (anyone on the network could use
  // the machine and read what it generates) unless this says it is meant.
  bool insecure = false;
  TlsFiles tls;  // both set: HTTPS (tls_server.h)
  // "host:port" of the `orchard cluster up` agent that started this server (its rank 0):
  // /api/cluster then carries what the agent knows (members, links, plan) for the page.
  std::string cluster_agent;
};

// True for addresses only this machine reaches: 127.0.0.0/8, ::1, "localhost".
bool is_loopback_host(const std::string& host);

// Lowers the calling thread's scheduling priority by 10 nice levels (once per thread): for threads that
// feed or read the server's streams, so they yield a busy core to the engine's step.
void lower_this_thread();

class Server {
 public:
  Server(Service& service, ServerOptions options);
  ~Server();
  // Binds the socket; throws naming host and port when it cannot. Returns the port.
  int bind();
  int bound_port() const { return port_; }
  // Serves until stop() (from another thread or a signal handler's thread).
  void run();
  void stop();

 private:
  Service& service_;
  ServerOptions opts_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = -1;
  int listen_fd_ = -1;
};

}  // namespace orchard::serve
