#pragma once
// Thin, deadline-bounded TCP helpers. Every wait here ends by a deadline, so
// no caller can hang on a peer that never answers.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace orchard::dist::net {

using Clock = std::chrono::steady_clock;

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct Endpoint {
  std::string host;  // numeric IPv4 address or a resolvable name
  uint16_t port = 0;
  std::string str() const { return host + ":" + std::to_string(port); }
};

// "host:port" -> Endpoint; throws CommError naming `what` when malformed.
Endpoint parse_endpoint(const std::string& text, const std::string& what);

// Listens on host:port (port 0 picks one); only on that interface.
Fd listen_on(const Endpoint& where, int backlog = 128);
uint16_t local_port(int fd);

// Connects, retrying refused/unreachable attempts until the deadline (peers
// start at different moments).
Fd connect_to(const Endpoint& where, Clock::time_point deadline);

// Accepts one connection or returns an empty Fd at the deadline.
Fd accept_until(int listen_fd, Clock::time_point deadline, std::string* peer_addr);

// Blocking-style full transfers on a (possibly non-blocking) socket, bounded
// by the deadline; throw CommError with `what` in the message on EOF, error
// or timeout.
void write_all(int fd, const void* buf, size_t n, Clock::time_point deadline, const std::string& what);
void read_all(int fd, void* buf, size_t n, Clock::time_point deadline, const std::string& what);

void set_nodelay(int fd);
void set_nonblocking(int fd);

}  // namespace orchard::dist::net
