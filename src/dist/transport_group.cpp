#include "dist/transport_group.h"

#include <algorithm>

namespace orchard::dist {

TransportGroup::TransportGroup(Transport& t, uint32_t id, size_t ring_bytes, size_t chunk_bytes)
    : t_(t), id_(id), ring_bytes_(ring_bytes), chunk_bytes_(chunk_bytes) {}

void TransportGroup::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size() || peer == rank())
    throw CommError(std::string(what) + ": peer " + std::to_string(peer) + " is not another rank of this group of " +
                    std::to_string(size()));
}

void TransportGroup::all_sum(void* buf, size_t count, DType type) { all_sum_with(buf, count, type, Algo::kAuto); }

void TransportGroup::all_sum_with(void* buf, size_t count, DType type, Algo algo) {
  if (size() == 1) return;
  const Tag tag = next(Op::kAllSum);
  const size_t bytes = count * dtype_size(type);
  if (algo == Algo::kAuto) algo = bytes >= ring_bytes_ ? Algo::kRing : Algo::kDirect;
  if (algo == Algo::kRing)
    all_sum_ring(t_, buf, count, type, tag, scratch_, chunk_bytes_);
  else
    all_sum_direct(t_, buf, count, type, tag, scratch_);
}

void TransportGroup::all_gather(const void* send, void* recv, size_t bytes) {
  const Tag tag = next(Op::kAllGather);
  if (bytes * static_cast<size_t>(size()) >= ring_bytes_)
    all_gather_ring(t_, send, recv, bytes, tag);
  else
    all_gather_direct(t_, send, recv, bytes, tag);
}

void TransportGroup::all_to_all(const void* send, void* recv, size_t bytes) {
  all_to_all_direct(t_, send, recv, bytes, next(Op::kAllToAll));
}

void TransportGroup::broadcast(void* buf, size_t bytes, int root) {
  if (root < 0 || root >= size()) throw CommError("broadcast: root " + std::to_string(root) + " is not a rank");
  const Tag tag = next(Op::kBroadcast);
  if (bytes >= ring_bytes_ && size() > 2)
    broadcast_chain(t_, buf, bytes, root, tag, chunk_bytes_);
  else
    broadcast_direct(t_, buf, bytes, root, tag);
}

void TransportGroup::send(const void* buf, size_t bytes, int dst) {
  check_peer(dst, "send");
  if (sent_.empty()) sent_.assign(static_cast<size_t>(size()), 0);
  t_.post_send(dst, buf, bytes, Tag{Op::kSend, id_, sent_[static_cast<size_t>(dst)]++});
  t_.wait();
}

void TransportGroup::recv(void* buf, size_t bytes, int src) {
  check_peer(src, "recv");
  if (received_.empty()) received_.assign(static_cast<size_t>(size()), 0);
  t_.post_recv(src, buf, bytes, Tag{Op::kSend, id_, received_[static_cast<size_t>(src)]++});
  t_.wait();
}

void TransportGroup::barrier() { barrier_direct(t_, next(Op::kBarrier)); }

std::unique_ptr<Group> TransportGroup::split(int color, int key) {
  const int n = size();
  int32_t mine[2] = {color, key};
  std::vector<int32_t> all(2 * static_cast<size_t>(n));
  all_gather_direct(t_, mine, all.data(), sizeof mine, next(Op::kSplit));
  const uint32_t split_no = splits_++;
  if (color < 0) return nullptr;
  std::vector<int> order;
  for (int r = 0; r < n; ++r)
    if (all[2 * static_cast<size_t>(r)] == color) order.push_back(r);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return all[2 * static_cast<size_t>(a) + 1] < all[2 * static_cast<size_t>(b) + 1];
  });
  // Sub-group ids only need to differ between groups sharing a pair of ranks.
  const uint32_t id = (id_ * 1000003u) ^ (split_no * 7919u + 1) ^ (static_cast<uint32_t>(color) * 2654435761u);
  return make_subgroup(order, id);
}

}  // namespace orchard::dist
