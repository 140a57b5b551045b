#include "dist/shm/shm_group.h"

#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <random>
#include <thread>

#include "dist/make_group.h"
#include "dist/net/auth.h"
#include "dist/reduce.h"
#include "platform/platform.h"

namespace orchard::dist {
namespace {

constexpr size_t kSlotBytes = 1 << 20;
constexpr size_t kMailboxBytes = 256 << 10;
// Below this a rank sums every slot itself; above, each rank sums its share
// once and all copy the result (n-fold fewer reads at the cost of a sync).
constexpr size_t kSplitSumBytes = 64 << 10;
constexpr auto kShmSpin = std::chrono::microseconds(2000);
constexpr auto kShmYield = std::chrono::microseconds(500);
// A peer seen in a different call for this long, with nothing moving, is a
// mismatch rather than a slow peer.
constexpr auto kMismatchAfter = std::chrono::seconds(1);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// What a rank is doing, published for peers: op, peer, direction, sequence.
constexpr uint64_t kReceiving = uint64_t{1} << 39;

uint64_t encode(Op op, int peer, uint32_t seq) {
  return (static_cast<uint64_t>(op) << 56) | (static_cast<uint64_t>(peer + 1) << 40) | seq;
}

// Copies into / out of a ring of `cap` bytes at absolute position `pos`.
void ring_put(uint8_t* ring, size_t cap, uint64_t pos, const uint8_t* src, size_t n) {
  const size_t at = static_cast<size_t>(pos % cap), first = std::min(n, cap - at);
  std::memcpy(ring + at, src, first);
  std::memcpy(ring, src + first, n - first);
}

void ring_get(const uint8_t* ring, size_t cap, uint64_t pos, uint8_t* dst, size_t n) {
  const size_t at = static_cast<size_t>(pos % cap), first = std::min(n, cap - at);
  std::memcpy(dst, ring + at, first);
  std::memcpy(dst + first, ring, n - first);
}

}  // namespace

std::unique_ptr<ShmGroup> ShmGroup::create(const Config& config) {
  return std::make_unique<ShmGroup>(TcpGroup::create(config));
}

ShmGroup::ShmGroup(std::unique_ptr<TcpGroup> boot) : boot_(std::move(boot)), me_(boot_->rank()), n_(boot_->size()) {
  // Every rank must share this host's memory.
  char host[64] = {};
  ::gethostname(host, sizeof host - 1);
  std::vector<char> hosts(64 * static_cast<size_t>(n_));
  boot_->all_gather(host, hosts.data(), 64);
  for (int r = 0; r < n_; ++r)
    if (std::strncmp(hosts.data() + 64 * r, host, 64) != 0)
      throw CommError("shm backend: rank " + std::to_string(r) + " runs on host '" +
                      std::string(hosts.data() + 64 * r) + "' but rank " + std::to_string(me_) + " on '" + host +
                      "'; shared memory needs every rank on one host (use --backend tcp across machines)");
  char name[64] = {};
  if (me_ == 0) {
    const auto nonce = net::random_nonce();
    std::snprintf(name, sizeof name, "/orchard-%d-%02x%02x%02x%02x%02x%02x", static_cast<int>(::getpid()), nonce[0],
                  nonce[1], nonce[2], nonce[3], nonce[4], nonce[5]);
    seg_ = shm::Segment::create(name, n_, kSlotBytes, kMailboxBytes);
  }
  try {
    boot_->broadcast(name, sizeof name, 0);
    if (me_ != 0) seg_ = shm::Segment::open(name, n_);
    boot_->barrier();
  } catch (...) {
    if (me_ == 0) shm::Segment::unlink(name);
    throw;
  }
  if (me_ == 0) shm::Segment::unlink(name);  // mapped everywhere: the name is no longer needed
  // More ranks than cores: a spinning waiter holds the core its peer needs.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  oversubscribed_ = static_cast<unsigned>(n_) > cores;
  spin_ = oversubscribed_ ? std::chrono::microseconds(2) : kShmSpin;
  sent_.assign(static_cast<size_t>(n_), 0);
  received_.assign(static_cast<size_t>(n_), 0);
  srcs_.resize(static_cast<size_t>(n_));
}

void ShmGroup::wake() {
  shm::SegmentHeader& h = seg_.header();
  if (h.sleepers.load() > 0) {
    h.epoch.fetch_add(1);
    platform::wake_address(&h.epoch);
  }
}

template <class Ready, class Blocker>
void ShmGroup::wait_until(Ready ready, Blocker blocker) {
  if (ready()) return;
  const auto start = net::Clock::now();
  for (int i = 1;; ++i) {
    if (ready()) return;
    cpu_relax();
    if ((i & 63) == 0 && net::Clock::now() - start > spin_) break;
  }
  // Oversubscribed: hand the core to the rank we wait for, a while, before
  // paying for a futex sleep and wake-up.
  if (oversubscribed_) {
    const auto yield_start = net::Clock::now();
    for (int i = 1;; ++i) {
      if (ready()) return;
      sched_yield();
      if ((i & 15) == 0 && net::Clock::now() - yield_start > kShmYield) break;
    }
  }
  shm::SegmentHeader& h = seg_.header();
  net::PeerMonitor& mon = boot_->mesh().monitor();
  uint64_t watched = 0;
  auto watched_since = net::Clock::now();
  for (;;) {
    const uint32_t e = h.epoch.load();
    h.sleepers.fetch_add(1);
    if (ready()) {
      h.sleepers.fetch_sub(1);
      return;
    }
    platform::wait_on_address(&h.epoch, e, 20'000'000);
    h.sleepers.fetch_sub(1);
    if (ready()) return;
    const int peer = blocker();
    if (peer < 0) continue;
    const int mesh_peer = boot_->members()[static_cast<size_t>(peer)];
    if (!mon.healthy(mesh_peer)) {
      if (ready()) return;  // it finished its part before leaving
      mon.raise(mesh_peer, describe(doing_));
    }
    // A peer stuck in another call while nothing moves is a mismatch.
    const uint64_t theirs = seg_.line(peer).doing.load(std::memory_order_acquire);
    const auto now = net::Clock::now();
    if (theirs != watched) {
      watched = theirs;
      watched_since = now;
    } else if (theirs != 0 && theirs != doing_ && now - watched_since > kMismatchAfter) {
      const Op op = static_cast<Op>(theirs >> 56), mine = static_cast<Op>(doing_ >> 56);
      const int their_peer = static_cast<int>((theirs >> 40) & 0xFFFF) - 1;
      // A send meeting the matching recv is the expected pairing.
      const bool paired = op == Op::kSend && mine == Op::kSend && their_peer == me_ &&
                          ((theirs & kReceiving) != (doing_ & kReceiving));
      if (!paired) mismatch(peer, theirs);
    }
  }
}

std::string ShmGroup::describe(uint64_t doing) const {
  const Op op = static_cast<Op>(doing >> 56);
  const int peer = static_cast<int>((doing >> 40) & 0xFFFF) - 1;
  std::string s = std::string(op == Op::kSend ? ((doing & kReceiving) ? "recv" : "send") : op_name(op)) + " #" +
                  std::to_string(doing & 0xFFFFFFFFull);
  if (op == Op::kSend) s += ((doing & kReceiving) ? " from rank " : " to rank ") + std::to_string(peer);
  return s;
}

void ShmGroup::mismatch(int peer, uint64_t theirs) {
  throw CommError("collective mismatch: rank " + std::to_string(peer) + " is in " + describe(theirs) +
                  " while rank " + std::to_string(me_) + " is in " + describe(doing_) +
                  ": every rank must call the same operations in the same order");
}

void ShmGroup::enter(Op op, int peer, uint32_t seq, bool receiving) {
  doing_ = encode(op, peer, seq) | (receiving ? kReceiving : 0);
  seg_.line(me_).doing.store(doing_, std::memory_order_release);
}

void ShmGroup::leave() {
  doing_ = 0;
  seg_.line(me_).doing.store(0, std::memory_order_relaxed);
}

void ShmGroup::sync(Op op, uint32_t seq, uint64_t bytes) {
  const uint64_t target = ++syncs_;
  shm::RankLine& mine = seg_.line(me_);
  const int parity = static_cast<int>(target & 1);
  mine.desc[parity][0] = (static_cast<uint64_t>(op) << 32) | seq;
  mine.desc[parity][1] = bytes;
  mine.arrive.store(target, std::memory_order_release);
  wake();
  int lagging = 0;
  wait_until(
      [&] {
        for (; lagging < n_; ++lagging)
          if (seg_.line(lagging).arrive.load(std::memory_order_acquire) < target) return false;
        return true;
      },
      [&] { return lagging < n_ ? lagging : -1; });
  for (int r = 0; r < n_; ++r) {
    const shm::RankLine& l = seg_.line(r);
    if (l.desc[parity][0] != mine.desc[parity][0] || l.desc[parity][1] != bytes) {
      const Op their_op = static_cast<Op>(l.desc[parity][0] >> 32);
      throw CommError("collective mismatch: rank " + std::to_string(r) + " called " + op_name(their_op) + " #" +
                      std::to_string(l.desc[parity][0] & 0xFFFFFFFF) + " on " + std::to_string(l.desc[parity][1]) +
                      " bytes while rank " + std::to_string(me_) + " called " + op_name(op) + " #" +
                      std::to_string(seq) + " on " + std::to_string(bytes) + " bytes");
    }
  }
}

void ShmGroup::all_sum(void* buf, size_t count, DType type) {
  const uint32_t seq = seq_++;
  enter(Op::kAllSum, -1, seq);
  const size_t es = dtype_size(type);
  const size_t piece = seg_.slot_bytes() / es;
  uint8_t* data = static_cast<uint8_t*>(buf);
  for (size_t off = 0; off < count; off += piece) {
    const size_t m = std::min(piece, count - off), bytes = m * es;
    const int set = set_for_round();
    std::memcpy(seg_.slot(me_, set), data + off * es, bytes);
    sync(Op::kAllSum, seq, count * es);
    if (bytes <= kSplitSumBytes) {
      // Everyone adds all slots in rank order: the same bits everywhere.
      for (int r = 0; r < n_; ++r) srcs_[static_cast<size_t>(r)] = seg_.slot(r, set);
      sum_sources(data + off * es, srcs_.data(), n_, m, type);
    } else {
      // Each rank sums its share into rank 0's slot, then all copy it.
      const size_t lo = m * static_cast<size_t>(me_) / static_cast<size_t>(n_);
      const size_t hi = m * static_cast<size_t>(me_ + 1) / static_cast<size_t>(n_);
      for (int r = 0; r < n_; ++r) srcs_[static_cast<size_t>(r)] = seg_.slot(r, set) + lo * es;
      sum_sources(seg_.slot(0, set) + lo * es, srcs_.data(), n_, hi - lo, type);
      sync(Op::kAllSum, seq, count * es);
      std::memcpy(data + off * es, seg_.slot(0, set), bytes);
    }
  }
  leave();
}

void ShmGroup::all_gather(const void* send, void* recv, size_t bytes) {
  const uint32_t seq = seq_++;
  enter(Op::kAllGather, -1, seq);
  const size_t piece = seg_.slot_bytes();
  const uint8_t* in = static_cast<const uint8_t*>(send);
  uint8_t* out = static_cast<uint8_t*>(recv);
  for (size_t off = 0; off == 0 || off < bytes; off += piece) {
    const size_t m = std::min(piece, bytes - off);
    const int set = set_for_round();
    std::memcpy(seg_.slot(me_, set), in + off, m);
    sync(Op::kAllGather, seq, bytes);
    for (int r = 0; r < n_; ++r) std::memcpy(out + bytes * static_cast<size_t>(r) + off, seg_.slot(r, set), m);
    if (bytes == 0) break;
  }
  leave();
}

// Each round a rank's slot holds a piece of every block it sends to another rank, side by side
// (the piece for rank r at r·m); after the round's arrival it reads its own piece from every
// other rank's slot. Its own block goes straight from send to recv: through the slot it was
// two copies instead of one (2 ranks, 4–8 MiB: 1.2× OpenMPI's time).
void ShmGroup::all_to_all(const void* send, void* recv, size_t bytes) {
  const uint32_t seq = seq_++;
  enter(Op::kAllToAll, -1, seq);
  const size_t n = static_cast<size_t>(n_), piece = seg_.slot_bytes() / n;
  const uint8_t* in = static_cast<const uint8_t*>(send);
  uint8_t* out = static_cast<uint8_t*>(recv);
  for (size_t off = 0; off == 0 || off < bytes; off += piece) {
    const size_t m = std::min(piece, bytes - off);
    const int set = set_for_round();
    const auto me = static_cast<size_t>(me_);
    for (size_t r = 0; r < n && m > 0; ++r)
      if (r != me) std::memcpy(seg_.slot(me_, set) + r * piece, in + bytes * r + off, m);
    if (m > 0) std::memcpy(out + bytes * me + off, in + bytes * me + off, m);
    sync(Op::kAllToAll, seq, bytes);  // also when empty: every rank still meets the others
    for (size_t r = 0; r < n && m > 0; ++r)
      if (r != me) std::memcpy(out + bytes * r + off, seg_.slot(static_cast<int>(r), set) + me * piece, m);
    if (bytes == 0) break;
  }
  leave();
}

void ShmGroup::broadcast(void* buf, size_t bytes, int root) {
  if (root < 0 || root >= n_) throw CommError("broadcast: root " + std::to_string(root) + " is not a rank");
  const uint32_t seq = seq_++;
  enter(Op::kBroadcast, root, seq);
  const size_t piece = seg_.slot_bytes();
  uint8_t* data = static_cast<uint8_t*>(buf);
  for (size_t off = 0; off == 0 || off < bytes; off += piece) {
    const size_t m = std::min(piece, bytes - off);
    const int set = set_for_round();
    if (me_ == root) std::memcpy(seg_.slot(root, set), data + off, m);
    sync(Op::kBroadcast, seq, bytes);
    if (me_ != root) std::memcpy(data + off, seg_.slot(root, set), m);
    if (bytes == 0) break;
  }
  leave();
}

void ShmGroup::barrier() {
  const uint32_t seq = seq_++;
  enter(Op::kBarrier, -1, seq);
  sync(Op::kBarrier, seq, 0);
  leave();
}

void ShmGroup::send(const void* buf, size_t bytes, int dst) {
  if (dst < 0 || dst >= n_ || dst == me_) throw CommError("send: " + std::to_string(dst) + " is not another rank");
  const uint32_t seq = sent_[static_cast<size_t>(dst)]++;
  enter(Op::kSend, dst, seq);
  shm::MailboxCounters& c = seg_.counters(me_, dst);
  uint8_t* ring = seg_.ring(me_, dst);
  const size_t cap = seg_.mailbox_bytes();
  const MsgHeader h = make_header(Tag{Op::kSend, 0, seq}, bytes);
  uint64_t w = c.written.load(std::memory_order_relaxed);
  auto put = [&](const uint8_t* src, size_t n) {
    while (n > 0) {
      uint64_t r = c.read.load(std::memory_order_acquire);
      if (w - r == cap) {
        wait_until([&] { return w - (r = c.read.load(std::memory_order_acquire)) < cap; }, [&] { return dst; });
      }
      const size_t k = std::min<size_t>(n, cap - (w - r));
      ring_put(ring, cap, w, src, k);
      w += k;
      src += k;
      n -= k;
      c.written.store(w, std::memory_order_release);
      wake();
    }
  };
  put(reinterpret_cast<const uint8_t*>(&h), sizeof h);
  put(static_cast<const uint8_t*>(buf), bytes);
  leave();
}

void ShmGroup::recv(void* buf, size_t bytes, int src) {
  if (src < 0 || src >= n_ || src == me_) throw CommError("recv: " + std::to_string(src) + " is not another rank");
  const uint32_t seq = received_[static_cast<size_t>(src)]++;
  enter(Op::kSend, src, seq, true);
  shm::MailboxCounters& c = seg_.counters(src, me_);
  const uint8_t* ring = seg_.ring(src, me_);
  const size_t cap = seg_.mailbox_bytes();
  uint64_t r = c.read.load(std::memory_order_relaxed);
  auto get = [&](uint8_t* dst, size_t n) {
    while (n > 0) {
      uint64_t w = c.written.load(std::memory_order_acquire);
      if (w == r) wait_until([&] { return (w = c.written.load(std::memory_order_acquire)) != r; }, [&] { return src; });
      const size_t k = std::min<size_t>(n, w - r);
      ring_get(ring, cap, r, dst, k);
      r += k;
      dst += k;
      n -= k;
      c.read.store(r, std::memory_order_release);
      wake();
    }
  };
  MsgHeader h{};
  get(reinterpret_cast<uint8_t*>(&h), sizeof h);
  check_header(h, Tag{Op::kSend, 0, seq}, bytes, std::to_string(src));
  get(static_cast<uint8_t*>(buf), bytes);
  leave();
}

std::unique_ptr<Group> ShmGroup::split(int color, int key) {
  const uint32_t seq = seq_++;
  enter(Op::kSplit, -1, seq);
  sync(Op::kSplit, seq, 0);
  auto sub = boot_->split(color, key);
  leave();
  if (!sub) return nullptr;
  std::unique_ptr<TcpGroup> tcp(static_cast<TcpGroup*>(sub.release()));
  return std::make_unique<ShmGroup>(std::move(tcp));
}

std::unique_ptr<Group> make_shm_group(const Config& config) { return ShmGroup::create(config); }

}  // namespace orchard::dist
