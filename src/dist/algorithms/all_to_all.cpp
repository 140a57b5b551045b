#include <cstring>

#include "dist/algorithms/algorithms.h"

namespace orchard::dist {

void all_to_all_direct(Transport& t, const void* send, void* recv, size_t bytes, const Tag& tag) {
  const int n = t.size(), me = t.rank();
  const uint8_t* in = static_cast<const uint8_t*>(send);
  uint8_t* out = static_cast<uint8_t*>(recv);
  const auto block = [bytes](int r) { return bytes * static_cast<size_t>(r); };
  if (bytes == 0) return;  // nothing moves (and the buffers may be null)
  std::memmove(out + block(me), in + block(me), bytes);
  // Peers in the order me+1, me+2, …: each rank starts with a different partner, so no one
  // rank's link takes every first message.
  for (int k = 1; k < n; ++k) {
    const int to = (me + k) % n, from = (me - k + n) % n;
    t.post_send(to, in + block(to), bytes, tag);
    t.post_recv(from, out + block(from), bytes, tag);
  }
  t.wait();
}

}  // namespace orchard::dist
