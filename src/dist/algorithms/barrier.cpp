#include "dist/algorithms/algorithms.h"

namespace orchard::dist {

void barrier_direct(Transport& t, const Tag& tag) {
  const int n = t.size(), me = t.rank();
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    t.post_send(r, nullptr, 0, tag);
    t.post_recv(r, nullptr, 0, tag);
  }
  t.wait();
}

}  // namespace orchard::dist
