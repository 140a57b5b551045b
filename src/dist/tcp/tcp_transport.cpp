#include "dist/tcp/tcp_transport.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "dist/group.h"
#include "platform/platform.h"

namespace orchard::dist {
namespace {

constexpr auto kTcpSpin = std::chrono::microseconds(2000);

std::chrono::microseconds spin_for(const net::Mesh& mesh) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(mesh.ranks_on_this_host()) <= cores ? kTcpSpin : std::chrono::microseconds(0);
}
constexpr int kPollSliceMs = 100;
constexpr auto kTcpYield = std::chrono::microseconds(500);
// Messages go out a piece at a time, with the peers' data read in between, rather than as much
// as the socket takes at once: both ends then copy in and out of the kernel in step. Pieces of
// 128 KiB for messages up to 1 MiB (a ring's chunks, a mid-sized all_to_all's blocks), 512 KiB
// beyond. Measured on loopback, 2 ranks, alternating rounds against sending whole messages:
// all_sum 1 MiB 960 -> 597 µs (OpenMPI's ob1/tcp: 553), 4 MiB 4050 -> 2464 (2539); all_to_all
// 4 MiB 1634 -> 1217 (1026), where 128 KiB pieces had made it slower (1412 -> 1880).
constexpr size_t kSmallPiece = 128 << 10, kLargePiece = 512 << 10;
constexpr size_t kSmallUpTo = 1 << 20;
// Reads stop at 128 KiB for the same reason, so that a rank's own sends go out in between: 2 ranks
// on loopback, all_to_all 1-16 MiB, 0.6-0.9x the time of reading all that has arrived.
constexpr size_t kReadPiece = 128 << 10;

}  // namespace

TcpTransport::TcpTransport(std::shared_ptr<net::Mesh> mesh, std::vector<int> members, int my_index)
    : mesh_(std::move(mesh)), members_(std::move(members)), me_(my_index) {
  const size_t n = members_.size();
  sends_.resize(n);
  recvs_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    sends_[i].items.reserve(16);
    recvs_[i].items.reserve(16);
  }
  spin_ = spin_for(*mesh_);
  link_free_.assign(n, net::Clock::time_point{});
  pollfds_.reserve(n);
  const Config& c = mesh_->config();
  latency_s_ = c.link_latency_us * 1e-6;
  bytes_per_s_ = c.link_gbps > 0 ? c.link_gbps * 1e9 / 8 : 0;
}

std::string TcpTransport::during() const {
  return std::string(op_name(current_.op)) + " #" + std::to_string(current_.seq);
}

void TcpTransport::fail(int peer, const std::string& why) const {
  // A dropped connection is often a consequence: the peer gave up because a third rank died.
  // Give the monitor a moment to see that, so the message names the root cause first.
  net::PeerMonitor& mon = mesh_->monitor();
  const auto until = net::Clock::now() + std::chrono::milliseconds(300);
  while (!mon.any_failed() && net::Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (const int root = mon.failed_peer(); root >= 0)
    mon.raise(root, root == members_[peer] ? during() : during() + "; rank " + peer_name(peer) + " then " + why);
  throw CommError("rank " + peer_name(peer) + " " + why + " during " + during() + " (seen by rank " +
                  std::to_string(mesh_->rank()) + ")");
}

void TcpTransport::post_send(int peer, const void* buf, size_t bytes, const Tag& tag) {
  current_ = tag;
  sends_[peer].items.push_back(
      Pending{static_cast<uint8_t*>(const_cast<void*>(buf)), bytes, 0, make_header(tag, bytes), tag, {}, false});
  progress_sends(peer);  // eager: small messages leave before wait()
}

void TcpTransport::post_recv(int peer, void* buf, size_t bytes, const Tag& tag) {
  current_ = tag;
  recvs_[peer].items.push_back(Pending{static_cast<uint8_t*>(buf), bytes, 0, MsgHeader{}, tag, {}, false});
}

bool TcpTransport::progress_sends(int peer) {
  Queue& q = sends_[peer];
  bool moved = false;
  const int fd = mesh_->data_fd(members_[peer]);
  while (q.busy()) {
    Pending& p = q.items[q.head];
    if (latency_s_ > 0 || bytes_per_s_ > 0) {
      const auto now = net::Clock::now();
      if (!p.timed) {
        // Emulated link: the message may leave once the link is free and its
        // latency and transmission time have passed.
        const double secs = latency_s_ + (bytes_per_s_ > 0 ? (p.bytes + sizeof(MsgHeader)) / bytes_per_s_ : 0);
        const auto start = std::max(now, link_free_[peer]);
        p.release = start + std::chrono::duration_cast<net::Clock::duration>(std::chrono::duration<double>(secs));
        link_free_[peer] = p.release;
        p.timed = true;
      }
      if (now < p.release) return moved;
    }
    iovec iov[2];
    int cnt = 0;
    constexpr size_t hb = sizeof(MsgHeader);
    if (p.done < hb) iov[cnt++] = {reinterpret_cast<uint8_t*>(&p.header) + p.done, hb - p.done};
    const size_t body_done = p.done > hb ? p.done - hb : 0;
    const size_t most = p.bytes <= kSmallUpTo ? kSmallPiece : kLargePiece;
    if (p.bytes > body_done) iov[cnt++] = {p.buf + body_done, std::min(most, p.bytes - body_done)};
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<size_t>(cnt);
    const ssize_t w = ::sendmsg(fd, &mh, MSG_DONTWAIT | platform::send_no_signal());
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return moved;
      fail(peer, std::string("dropped its connection (") + std::strerror(errno) + "; it exited or crashed)");
    }
    moved = true;
    p.done += static_cast<size_t>(w);
    if (p.done < hb + p.bytes) return moved;
    ++q.head;
  }
  return moved;
}

bool TcpTransport::progress_recvs(int peer) {
  Queue& q = recvs_[peer];
  bool moved = false;
  const int fd = mesh_->data_fd(members_[peer]);
  constexpr size_t hb = sizeof(MsgHeader);
  while (q.busy()) {
    Pending& p = q.items[q.head];
    iovec iov[2];
    int cnt = 0;
    if (p.done < hb) iov[cnt++] = {reinterpret_cast<uint8_t*>(&p.header) + p.done, hb - p.done};
    const size_t body_done = p.done > hb ? p.done - hb : 0;
    if (p.bytes > body_done) iov[cnt++] = {p.buf + body_done, std::min(kReadPiece, p.bytes - body_done)};
    const ssize_t r = ::readv(fd, iov, cnt);
    if (r == 0) fail(peer, "closed its connection (it exited or crashed)");
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return moved;
      fail(peer, std::string("dropped its connection (") + std::strerror(errno) + ")");
    }
    moved = true;
    const bool had_header = p.done >= hb;
    p.done += static_cast<size_t>(r);
    if (!had_header && p.done >= hb) check_header(p.header, p.tag, p.bytes, peer_name(peer));
    if (p.done < hb + p.bytes) return moved;
    ++q.head;
  }
  return moved;
}

void TcpTransport::wait() {
  const int n = size();
  auto last_move = net::Clock::now();
  std::vector<pollfd>& fds = pollfds_;
  for (;;) {
    bool busy = false, moved = false;
    for (int p = 0; p < n; ++p) {
      if (sends_[p].busy()) moved |= progress_sends(p);
      if (recvs_[p].busy()) moved |= progress_recvs(p);
      busy |= sends_[p].busy() || recvs_[p].busy();
    }
    if (!busy) break;
    const auto now = net::Clock::now();
    if (moved) {
      last_move = now;
      continue;
    }
    // A peer that left cleanly is not an error here: its data socket still
    // delivers everything it sent before the FIN, then reports EOF.
    net::PeerMonitor& mon = mesh_->monitor();
    if (!mon.healthy(-1)) mon.raise(-1, during());
    if (now - last_move < spin_) continue;
    // More ranks than cores (spin_ 0): hand the core to a peer a while, as shm does, before
    // sleeping in poll and paying for the wake-up (4 ranks on 2 cores, medians of 3 rounds:
    // 1 KiB all_sum 93 -> 71 µs, all_to_all 82 -> 45; OpenMPI's, which yields too, 58 and 66).
    if (spin_.count() == 0 && now - last_move < kTcpYield) {
      sched_yield();
      continue;
    }
    // Sleep until a socket is ready, an emulated release time, or the next
    // monitor check.
    fds.clear();
    int timeout = kPollSliceMs;
    for (int p = 0; p < n; ++p) {
      short ev = 0;
      if (recvs_[p].busy()) ev |= POLLIN;
      if (sends_[p].busy()) {
        const Pending& s = sends_[p].items[sends_[p].head];
        if (s.timed && s.release > now) {
          const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(s.release - now).count();
          timeout = std::min<int>(timeout, static_cast<int>(ms));
          if (timeout == 0) timeout = -2;  // sub-millisecond: keep spinning
        } else {
          ev |= POLLOUT;
        }
      }
      if (ev) fds.push_back(pollfd{mesh_->data_fd(members_[p]), ev, 0});
    }
    if (timeout == -2) continue;
    ::poll(fds.data(), fds.size(), timeout);
  }
  for (int p = 0; p < n; ++p) {
    sends_[p].items.clear();
    sends_[p].head = 0;
    recvs_[p].items.clear();
    recvs_[p].head = 0;
  }
}

}  // namespace orchard::dist
