#include "dist/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "dist/group.h"
#include "platform/platform.h"

namespace orchard::dist::net {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

sockaddr_in resolve(const Endpoint& e) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(e.port);
  if (inet_pton(AF_INET, e.host.c_str(), &sa.sin_addr) == 1) return sa;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(e.host.c_str(), nullptr, &hints, &res) != 0 || !res)
    throw CommError("cannot resolve host '" + e.host + "'");
  sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return sa;
}

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

}  // namespace

Endpoint parse_endpoint(const std::string& text, const std::string& what) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw CommError(what + ": expected host:port, got '" + text + "'");
  Endpoint e;
  e.host = text.substr(0, colon);
  try {
    size_t used = 0;
    const unsigned long p = std::stoul(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || p > 65535) throw std::out_of_range("port");
    e.port = static_cast<uint16_t>(p);
  } catch (const std::logic_error&) {
    throw CommError(what + ": bad port in '" + text + "'");
  }
  return e;
}

Fd listen_on(const Endpoint& where, int backlog) {
  Fd fd(platform::tcp_socket(/*nonblocking=*/false));
  if (!fd) throw CommError(sys_error("socket"));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = resolve(where);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    throw CommError(sys_error("cannot listen on " + where.str()));
  if (::listen(fd.get(), backlog) != 0) throw CommError(sys_error("listen on " + where.str()));
  return fd;
}

uint16_t local_port(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) throw CommError(sys_error("getsockname"));
  return ntohs(sa.sin_port);
}

Fd connect_to(const Endpoint& where, Clock::time_point deadline) {
  const sockaddr_in sa = resolve(where);
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    Fd fd(platform::tcp_socket(/*nonblocking=*/true));
    if (!fd) throw CommError(sys_error("socket"));
    int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      rc = ::poll(&p, 1, std::max(1, std::min(ms_until(deadline), 2000)));
      if (rc == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        errno = err;
        rc = err == 0 ? 0 : -1;
      } else {
        errno = ETIMEDOUT;
        rc = -1;
      }
    }
    if (rc == 0) {
      const int flags = ::fcntl(fd.get(), F_GETFL);
      ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
      set_nodelay(fd.get());
      return fd;
    }
    const int err = errno;
    if (Clock::now() + pause >= deadline)
      throw CommError("cannot connect to " + where.str() + ": " + std::strerror(err) + " (gave up at the deadline)");
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH && err != ECONNRESET)
      throw CommError("cannot connect to " + where.str() + ": " + std::strerror(err));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

Fd accept_until(int listen_fd, Clock::time_point deadline, std::string* peer_addr) {
  for (;;) {
    pollfd p{listen_fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, ms_until(deadline));
    if (rc == 0) return Fd();
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw CommError(sys_error("poll on listening socket"));
    }
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    Fd fd(platform::accept_connection(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len));
    if (!fd) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) continue;
      throw CommError(sys_error("accept"));
    }
    if (peer_addr) {
      char buf[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof buf);
      *peer_addr = std::string(buf) + ":" + std::to_string(ntohs(sa.sin_port));
    }
    set_nodelay(fd.get());
    return fd;
  }
}

void write_all(int fd, const void* buf, size_t n, Clock::time_point deadline, const std::string& what) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, platform::send_no_signal() | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) throw CommError(sys_error(what));
    pollfd pf{fd, POLLOUT, 0};
    if (::poll(&pf, 1, ms_until(deadline)) == 0) throw CommError(what + ": timed out");
  }
}

void read_all(int fd, void* buf, size_t n, Clock::time_point deadline, const std::string& what) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) throw CommError(what + ": connection closed by peer");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw CommError(sys_error(what));
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, ms_until(deadline)) == 0) throw CommError(what + ": timed out");
  }
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

}  // namespace orchard::dist::net
