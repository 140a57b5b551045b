#include "dist/rdma/rdma_transport.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "dist/group.h"
#include "dist/tcp/tcp_group.h"

namespace orchard::dist::rdma {
namespace {

constexpr uint32_t kCreditBit = 0x80000000u;
constexpr uint64_t kRecvId = 1;
constexpr uint64_t kDataId = 2;
// Credit returns: a failure only means the peer is done with us (it may
// have finished and closed); if we still need it, the monitor says so.
constexpr uint64_t kCreditId = 3;

}  // namespace

Links::Links(std::unique_ptr<Verbs> v, TcpGroup& boot) : verbs(std::move(v)), rank(boot.rank()) {
  const int n = boot.size();
  peers.resize(static_cast<size_t>(n));
  std::vector<Endpoint> mine(static_cast<size_t>(n)), all(static_cast<size_t>(n) * static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    Peer& peer = peers[static_cast<size_t>(p)];
    peer.ring.assign(kRingBytes, 0);
    peer.stage.assign(kRingBytes, 0);
    peer.ring_mr = verbs->register_memory(peer.ring.data(), peer.ring.size());
    peer.stage_mr = verbs->register_memory(peer.stage.data(), peer.stage.size());
    peer.qp = verbs->create_qp(kDepth);
    for (int i = 0; i < kDepth; ++i) peer.qp->post_recv(kRecvId);
    Endpoint e = peer.qp->local();
    e.addr = reinterpret_cast<uint64_t>(peer.ring.data());
    e.rkey = peer.ring_mr.rkey;
    mine[static_cast<size_t>(p)] = e;
  }
  boot.all_gather(mine.data(), all.data(), sizeof(Endpoint) * static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    const Endpoint& theirs = all[static_cast<size_t>(p) * static_cast<size_t>(n) + static_cast<size_t>(rank)];
    Peer& peer = peers[static_cast<size_t>(p)];
    peer.qp->connect(theirs);
    peer.remote_addr = theirs.addr;
    peer.remote_rkey = theirs.rkey;
  }
  // Nobody writes before every queue pair is ready to receive.
  boot.barrier();
}

Links::~Links() {
  for (Peer& p : peers) {
    if (!p.qp) continue;
    p.qp.reset();
    verbs->deregister(p.ring_mr);
    verbs->deregister(p.stage_mr);
  }
}

RdmaTransport::RdmaTransport(std::shared_ptr<Links> links, net::Mesh& mesh, std::vector<int> members, int my_index)
    : links_(std::move(links)), mesh_(mesh), members_(std::move(members)), me_(my_index) {
  sends_.resize(members_.size());
  recvs_.resize(members_.size());
  for (auto& q : sends_) q.items.reserve(16);
  for (auto& q : recvs_) q.items.reserve(16);
}

void RdmaTransport::fail(int peer, const std::string& why) const {
  throw CommError("rank " + peer_name(peer) + ": " + why + " during " + op_name(current_.op) + " #" +
                  std::to_string(current_.seq) + " (rdma, seen by rank " + std::to_string(mesh_.rank()) + ")");
}

void RdmaTransport::post_send(int peer, const void* buf, size_t bytes, const Tag& tag) {
  current_ = tag;
  sends_[peer].items.push_back(
      Pending{static_cast<uint8_t*>(const_cast<void*>(buf)), bytes, 0, make_header(tag, bytes), tag});
}

void RdmaTransport::post_recv(int peer, void* buf, size_t bytes, const Tag& tag) {
  current_ = tag;
  recvs_[peer].items.push_back(Pending{static_cast<uint8_t*>(buf), bytes, 0, MsgHeader{}, tag});
}

bool RdmaTransport::poll_completions(int peer) {
  Links::Peer& l = links_->peers[static_cast<size_t>(members_[peer])];
  Completion c[16];
  bool moved = false;
  for (;;) {
    const int got = l.qp->poll(c, 16);
    for (int i = 0; i < got; ++i) {
      if (!c[i].ok && !(!c[i].is_recv && c[i].wr_id == kCreditId)) fail(peer, "RDMA write failed: " + c[i].error);
      if (!c[i].is_recv) {
        --l.in_flight;
        continue;
      }
      moved = true;
      if (c[i].imm & kCreditBit)
        l.peer_consumed += c[i].imm & ~kCreditBit;
      else
        l.arrived += c[i].imm;
      l.qp->post_recv(kRecvId);
    }
    if (got < 16) return moved;
  }
}

bool RdmaTransport::progress_send(int peer) {
  Links::Peer& l = links_->peers[static_cast<size_t>(members_[peer])];
  Queue& q = sends_[peer];
  bool moved = false;
  constexpr size_t hb = sizeof(MsgHeader), cap = Links::kRingBytes;
  while (q.busy()) {
    Pending& p = q.items[q.head];
    const size_t total = hb + p.bytes;
    // Keep one slot of the queue for credit returns.
    while (p.done < total && l.in_flight < Links::kDepth - 1) {
      const size_t free = cap - static_cast<size_t>(l.sent - l.peer_consumed);
      const size_t at = static_cast<size_t>(l.sent % cap);
      const size_t piece = std::min({total - p.done, free, cap - at, cap / 4});
      if (piece == 0) return moved;
      // Stage the stream bytes [done, done+piece): header first, then payload.
      uint8_t* dst = l.stage.data() + at;
      size_t k = 0;
      if (p.done < hb) {
        k = std::min(piece, hb - p.done);
        std::memcpy(dst, reinterpret_cast<const uint8_t*>(&p.header) + p.done, k);
      }
      if (piece > k) std::memcpy(dst + k, p.buf + (p.done + k - hb), piece - k);
      l.qp->write_imm(l.stage_mr, dst, piece, l.remote_addr + at, l.remote_rkey, static_cast<uint32_t>(piece), kDataId);
      ++l.in_flight;
      l.sent += piece;
      p.done += piece;
      moved = true;
    }
    if (p.done < total) return moved;
    ++q.head;
  }
  return moved;
}

bool RdmaTransport::progress_recv(int peer) {
  Links::Peer& l = links_->peers[static_cast<size_t>(members_[peer])];
  Queue& q = recvs_[peer];
  bool moved = false;
  constexpr size_t hb = sizeof(MsgHeader), cap = Links::kRingBytes;
  while (q.busy()) {
    Pending& p = q.items[q.head];
    const size_t total = hb + p.bytes;
    while (p.done < total && l.arrived > l.consumed) {
      const size_t at = static_cast<size_t>(l.consumed % cap);
      const size_t k = std::min({total - p.done, static_cast<size_t>(l.arrived - l.consumed), cap - at});
      const uint8_t* src = l.ring.data() + at;
      size_t h = 0;
      if (p.done < hb) {
        h = std::min(k, hb - p.done);
        std::memcpy(reinterpret_cast<uint8_t*>(&p.header) + p.done, src, h);
        if (p.done + h == hb) check_header(p.header, p.tag, p.bytes, peer_name(peer));
      }
      if (k > h) std::memcpy(p.buf + (p.done + h - hb), src + h, k - h);
      p.done += k;
      l.consumed += k;
      moved = true;
    }
    // Hand the space back so the sender can go on.
    const uint64_t owed = l.consumed - l.credited;
    if (owed > 0 && l.in_flight < Links::kDepth) {
      l.qp->write_imm(l.stage_mr, l.stage.data(), 0, l.remote_addr, l.remote_rkey,
                      kCreditBit | static_cast<uint32_t>(owed), kCreditId);
      ++l.in_flight;
      l.credited = l.consumed;
    }
    if (p.done < total) return moved;
    ++q.head;
  }
  return moved;
}

void RdmaTransport::wait() {
  const int n = size();
  int idle = 0;
  for (;;) {
    bool busy = false, moved = false;
    for (int p = 0; p < n; ++p) {
      if (p == me_) continue;
      moved |= poll_completions(p);
      if (sends_[p].busy()) moved |= progress_send(p);
      if (recvs_[p].busy()) moved |= progress_recv(p);
      busy |= sends_[p].busy() || recvs_[p].busy();
    }
    if (!busy) break;
    if (moved) {
      idle = 0;
      continue;
    }
    if (++idle % 256 == 0) {
      // RDMA has no end-of-stream: a peer that left (even cleanly) while we
      // still expect its data is a failure, once its last writes are drained.
      net::PeerMonitor& mon = mesh_.monitor();
      for (int p = 0; p < n; ++p) {
        if (p == me_ || !(sends_[p].busy() || recvs_[p].busy()) || mon.healthy(members_[p])) continue;
        poll_completions(p);
        if (recvs_[p].busy()) progress_recv(p);
        if (sends_[p].busy() || recvs_[p].busy())
          mon.raise(members_[p], std::string(op_name(current_.op)) + " #" + std::to_string(current_.seq));
      }
      sched_yield();
    }
  }
  for (int p = 0; p < n; ++p) {
    sends_[p].items.clear();
    sends_[p].head = 0;
    recvs_[p].items.clear();
    recvs_[p].head = 0;
  }
}

}  // namespace orchard::dist::rdma
