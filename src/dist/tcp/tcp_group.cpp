#include "dist/tcp/tcp_group.h"

#include "dist/make_group.h"

#include <algorithm>
#include <numeric>

namespace orchard::dist {
namespace {

// Measured with `orchard bench comm` (docs/benchmarks.md): below this the
// one-round exchange wins on loopback and gigabit links alike.
constexpr size_t kDefaultRingBytes = 256 << 10;

int index_of(const std::vector<int>& members, int mesh_rank) {
  const auto it = std::find(members.begin(), members.end(), mesh_rank);
  return static_cast<int>(it - members.begin());
}

}  // namespace

std::unique_ptr<TcpGroup> TcpGroup::create(const Config& config) {
  auto mesh = net::Mesh::connect(config, 1);
  std::vector<int> all(static_cast<size_t>(config.size));
  std::iota(all.begin(), all.end(), 0);
  return std::make_unique<TcpGroup>(std::move(mesh), std::move(all), 0);
}

TcpGroup::TcpGroup(std::shared_ptr<net::Mesh> mesh, std::vector<int> members, uint32_t id)
    : mesh_(mesh),
      members_(members),
      id_(id),
      sent_(members.size(), 0),
      received_(members.size(), 0),
      transport_(mesh, members, index_of(members, mesh->rank())),
      ring_bytes_(mesh->config().ring_bytes ? mesh->config().ring_bytes : kDefaultRingBytes) {}

void TcpGroup::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size() || peer == rank())
    throw CommError(std::string(what) + ": peer " + std::to_string(peer) + " is not another rank of this group of " +
                    std::to_string(size()));
}

void TcpGroup::all_sum(void* buf, size_t count, DType type) { all_sum_with(buf, count, type, Algo::kAuto); }

void TcpGroup::all_sum_with(void* buf, size_t count, DType type, Algo algo) {
  if (size() == 1) return;
  const Tag tag = next(Op::kAllSum);
  const size_t bytes = count * dtype_size(type);
  if (algo == Algo::kAuto) algo = bytes >= ring_bytes_ ? Algo::kRing : Algo::kDirect;
  if (algo == Algo::kRing)
    all_sum_ring(transport_, buf, count, type, tag, scratch_, chunk_bytes_);
  else
    all_sum_direct(transport_, buf, count, type, tag, scratch_);
}

void TcpGroup::all_gather(const void* send, void* recv, size_t bytes) {
  const Tag tag = next(Op::kAllGather);
  if (bytes * static_cast<size_t>(size()) >= ring_bytes_)
    all_gather_ring(transport_, send, recv, bytes, tag);
  else
    all_gather_direct(transport_, send, recv, bytes, tag);
}

void TcpGroup::broadcast(void* buf, size_t bytes, int root) {
  if (root < 0 || root >= size()) throw CommError("broadcast: root " + std::to_string(root) + " is not a rank");
  const Tag tag = next(Op::kBroadcast);
  if (bytes >= ring_bytes_ && size() > 2)
    broadcast_chain(transport_, buf, bytes, root, tag, chunk_bytes_);
  else
    broadcast_direct(transport_, buf, bytes, root, tag);
}

void TcpGroup::send(const void* buf, size_t bytes, int dst) {
  check_peer(dst, "send");
  transport_.post_send(dst, buf, bytes, Tag{Op::kSend, id_, sent_[dst]++});
  transport_.wait();
}

void TcpGroup::recv(void* buf, size_t bytes, int src) {
  check_peer(src, "recv");
  transport_.post_recv(src, buf, bytes, Tag{Op::kSend, id_, received_[src]++});
  transport_.wait();
}

void TcpGroup::barrier() { barrier_direct(transport_, next(Op::kBarrier)); }

std::unique_ptr<Group> TcpGroup::split(int color, int key) {
  const int n = size();
  int32_t mine[2] = {color, key};
  std::vector<int32_t> all(2 * static_cast<size_t>(n));
  all_gather_direct(transport_, mine, all.data(), sizeof mine, next(Op::kSplit));
  const uint32_t split_no = splits_++;
  if (color < 0) return nullptr;
  std::vector<int> order;
  for (int r = 0; r < n; ++r)
    if (all[2 * r] == color) order.push_back(r);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  std::vector<int> members;
  for (int r : order) members.push_back(members_[r]);
  // Sub-group ids only need to differ between groups sharing a pair of ranks.
  const uint32_t id = (id_ * 1000003u) ^ (split_no * 7919u + 1) ^ (static_cast<uint32_t>(color) * 2654435761u);
  return std::make_unique<TcpGroup>(mesh_, std::move(members), id);
}

}  // namespace orchard::dist

namespace orchard::dist {
std::unique_ptr<Group> make_tcp_group(const Config& config) { return TcpGroup::create(config); }
}  // namespace orchard::dist
