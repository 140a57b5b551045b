#include <algorithm>

#include "dist/algorithms/algorithms.h"
#include "dist/reduce.h"

namespace orchard::dist {

void all_sum_ring(Transport& t, void* buf, size_t count, DType type, const Tag& tag, Scratch& scratch,
                  size_t chunk_bytes) {
  const int n = t.size(), me = t.rank();
  if (n == 1) return;
  const size_t es = dtype_size(type);
  uint8_t* data = static_cast<uint8_t*>(buf);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  // Segment s covers elements [begin(s), begin(s+1)).
  auto begin = [&](int s) { return count * static_cast<size_t>(s) / static_cast<size_t>(n); };
  auto seg_len = [&](int s) { return begin(s + 1) - begin(s); };
  const size_t chunk = std::max<size_t>(1, chunk_bytes / es);
  // Every rank must send and expect the same number of chunk messages per
  // step, so the count comes from the largest segment, not this rank's.
  const size_t max_seg = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
  const size_t pieces = std::max<size_t>(1, (max_seg + chunk - 1) / chunk);
  uint8_t* tmp[2];
  tmp[0] = static_cast<uint8_t*>(scratch.get(2 * chunk * es));
  tmp[1] = tmp[0] + chunk * es;

  // Reduce-scatter: after step k, segment (me-k-1) holds the sum of k+2
  // ranks; after n-1 steps rank `me` owns the full sum of segment me+1.
  for (int k = 0; k < n - 1; ++k) {
    const int s_send = (me - k + 2 * n) % n, s_recv = (me - k - 1 + 2 * n) % n;
    size_t pending_off = 0, pending_len = 0;
    int pending_slot = 0, slot = 0;
    for (size_t i = 0; i < pieces; ++i) {
      const size_t off = i * chunk;
      const size_t send_len = off < seg_len(s_send) ? std::min(chunk, seg_len(s_send) - off) : 0;
      const size_t recv_len = off < seg_len(s_recv) ? std::min(chunk, seg_len(s_recv) - off) : 0;
      t.post_send(right, data + (begin(s_send) + off) * es, send_len * es, tag);
      t.post_recv(left, tmp[slot], recv_len * es, tag);
      // Add the previous chunk while this one is on the wire.
      if (pending_len) add_into(data + (begin(s_recv) + pending_off) * es, tmp[pending_slot], pending_len, type);
      t.wait();
      pending_off = off;
      pending_len = recv_len;
      pending_slot = slot;
      slot ^= 1;
    }
    if (pending_len) add_into(data + (begin(s_recv) + pending_off) * es, tmp[pending_slot], pending_len, type);
  }
  // All-gather of the owned segments, received straight into place.
  for (int k = 0; k < n - 1; ++k) {
    const int s_send = (me + 1 - k + 2 * n) % n, s_recv = (me - k + 2 * n) % n;
    for (size_t i = 0; i < pieces; ++i) {
      const size_t off = i * chunk;
      const size_t send_len = off < seg_len(s_send) ? std::min(chunk, seg_len(s_send) - off) : 0;
      const size_t recv_len = off < seg_len(s_recv) ? std::min(chunk, seg_len(s_recv) - off) : 0;
      t.post_send(right, data + (begin(s_send) + off) * es, send_len * es, tag);
      t.post_recv(left, data + (begin(s_recv) + off) * es, recv_len * es, tag);
      t.wait();
    }
  }
}

}  // namespace orchard::dist
