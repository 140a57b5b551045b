#include <algorithm>

#include "dist/algorithms/algorithms.h"

namespace orchard::dist {

void broadcast_direct(Transport& t, void* buf, size_t bytes, int root, const Tag& tag) {
  const int n = t.size(), me = t.rank();
  if (me == root) {
    for (int r = 0; r < n; ++r)
      if (r != root) t.post_send(r, buf, bytes, tag);
  } else {
    t.post_recv(root, buf, bytes, tag);
  }
  t.wait();
}

void broadcast_chain(Transport& t, void* buf, size_t bytes, int root, const Tag& tag, size_t chunk_bytes) {
  const int n = t.size(), me = t.rank();
  const int pos = (me - root + n) % n;  // place along the chain
  const int next = pos + 1 < n ? (me + 1) % n : -1;
  const int prev = pos > 0 ? (me + n - 1) % n : -1;
  uint8_t* data = static_cast<uint8_t*>(buf);
  const size_t chunk = std::max<size_t>(1, chunk_bytes);
  const size_t pieces = std::max<size_t>(1, (bytes + chunk - 1) / chunk);
  auto piece = [&](size_t i) { return i * chunk < bytes ? std::min(chunk, bytes - i * chunk) : 0; };
  if (prev < 0) {
    if (next < 0) return;
    for (size_t i = 0; i < pieces; ++i) t.post_send(next, data + i * chunk, piece(i), tag);
    t.wait();
    return;
  }
  // Receive piece i while forwarding piece i-1.
  for (size_t i = 0; i <= pieces; ++i) {
    if (i < pieces) t.post_recv(prev, data + i * chunk, piece(i), tag);
    if (next >= 0 && i > 0) t.post_send(next, data + (i - 1) * chunk, piece(i - 1), tag);
    t.wait();
  }
}

}  // namespace orchard::dist
