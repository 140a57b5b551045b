#include "dist/algorithms/algorithms.h"
#include "dist/reduce.h"

namespace orchard::dist {

void all_sum_direct(Transport& t, void* buf, size_t count, DType type, const Tag& tag, Scratch& scratch) {
  const int n = t.size(), me = t.rank();
  const size_t bytes = count * dtype_size(type);
  uint8_t* slots = static_cast<uint8_t*>(scratch.get(bytes * static_cast<size_t>(n)));
  const void* srcs[256];
  std::vector<const void*> many;
  const void** src = srcs;
  if (n > 256) {
    many.resize(static_cast<size_t>(n));
    src = many.data();
  }
  for (int r = 0; r < n; ++r) {
    src[r] = r == me ? buf : slots + bytes * static_cast<size_t>(r);
    if (r == me) continue;
    t.post_send(r, buf, bytes, tag);
    t.post_recv(r, slots + bytes * static_cast<size_t>(r), bytes, tag);
  }
  t.wait();
  sum_sources(buf, src, n, count, type);
}

}  // namespace orchard::dist
