// What a stranger's bytes reach first: the accepting side of the rank
// handshake, fed through a socket pair. It must refuse (and log) junk without
// crashing, hanging or reading past what arrived.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdint>
#include <cstddef>

#include "dist/config.h"
#include "dist/net/mesh.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] { return std::freopen("/dev/null", "w", stderr) != nullptr; }();
  (void)quiet;
  if (size > 60000) return 0;  // stay within one socket buffer
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  if (size) [[maybe_unused]] ssize_t w = ::write(sv[1], data, size);
  ::shutdown(sv[1], SHUT_WR);
  orchard::dist::Config c;
  c.size = 3;
  c.secret = "fuzz";
  int rank = -1, lane = -1;
  orchard::dist::net::accept_handshake(sv[0], c, "fuzzer", &rank, &lane);
  ::close(sv[0]);
  ::close(sv[1]);
  return 0;
}
