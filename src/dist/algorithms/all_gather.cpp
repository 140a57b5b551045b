#include <cstring>

#include "dist/algorithms/algorithms.h"

namespace orchard::dist {

void all_gather_direct(Transport& t, const void* send, void* recv, size_t bytes, const Tag& tag) {
  const int n = t.size(), me = t.rank();
  uint8_t* out = static_cast<uint8_t*>(recv);
  if (out + bytes * static_cast<size_t>(me) != send) std::memmove(out + bytes * static_cast<size_t>(me), send, bytes);
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    t.post_send(r, out + bytes * static_cast<size_t>(me), bytes, tag);
    t.post_recv(r, out + bytes * static_cast<size_t>(r), bytes, tag);
  }
  t.wait();
}

void all_gather_ring(Transport& t, const void* send, void* recv, size_t bytes, const Tag& tag) {
  const int n = t.size(), me = t.rank();
  uint8_t* out = static_cast<uint8_t*>(recv);
  if (out + bytes * static_cast<size_t>(me) != send) std::memmove(out + bytes * static_cast<size_t>(me), send, bytes);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  // Step k passes on the block that arrived in step k-1 (our own first).
  for (int k = 0; k < n - 1; ++k) {
    const int b_send = (me - k + n) % n, b_recv = (me - k - 1 + n) % n;
    t.post_send(right, out + bytes * static_cast<size_t>(b_send), bytes, tag);
    t.post_recv(left, out + bytes * static_cast<size_t>(b_recv), bytes, tag);
    t.wait();
  }
}

}  // namespace orchard::dist
