#include "dist/net/monitor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "dist/group.h"
#include "platform/platform.h"

namespace orchard::dist::net {
namespace {

constexpr char kBeat = 'H';
constexpr char kBye = 'B';

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

PeerMonitor::PeerMonitor(int rank, std::vector<Fd> control, std::vector<std::string> names, double timeout_s)
    : rank_(rank),
      control_(std::move(control)),
      names_(std::move(names)),
      timeout_s_(timeout_s),
      state_(new std::atomic<int>[control_.size()]),
      last_seen_ns_(new std::atomic<int64_t>[control_.size()]) {
  const int64_t t = now_ns();
  for (size_t i = 0; i < control_.size(); ++i) {
    state_[i].store(kAlive);
    last_seen_ns_[i].store(t);
    if (control_[i]) set_nonblocking(control_[i].get());
  }
  if (!platform::make_pipe(wake_, /*nonblocking=*/true)) throw CommError("pipe for the peer monitor failed");
  thread_ = std::thread([this] { run(); });
}

PeerMonitor::~PeerMonitor() {
  goodbye();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void PeerMonitor::goodbye() {
  if (stop_.exchange(true)) return;
  const char c = 1;
  [[maybe_unused]] ssize_t w = ::write(wake_[1], &c, 1);
  thread_.join();
  for (auto& fd : control_)
    if (fd) {
      [[maybe_unused]] ssize_t s = ::send(fd.get(), &kBye, 1, platform::send_no_signal() | MSG_DONTWAIT);
      ::shutdown(fd.get(), SHUT_WR);
    }
}

void PeerMonitor::run() {
  const auto interval = std::chrono::duration<double>(std::min(1.0, timeout_s_ / 4));
  const int64_t timeout_ns = static_cast<int64_t>(timeout_s_ * 1e9);
  std::vector<pollfd> fds;
  std::vector<int> who;
  auto next_beat = Clock::now();
  while (!stop_.load(std::memory_order_acquire)) {
    const auto now = Clock::now();
    if (now >= next_beat) {
      for (size_t i = 0; i < control_.size(); ++i)
        if (control_[i] && state_[i].load() == kAlive)
          [[maybe_unused]] ssize_t s = ::send(control_[i].get(), &kBeat, 1, platform::send_no_signal() | MSG_DONTWAIT);
      next_beat = now + std::chrono::duration_cast<Clock::duration>(interval);
    }
    const int64_t t = now_ns();
    fds.assign(1, pollfd{wake_[0], POLLIN, 0});
    who.assign(1, -1);
    for (size_t i = 0; i < control_.size(); ++i) {
      if (!control_[i] || state_[i].load() != kAlive) continue;
      if (t - last_seen_ns_[i].load() > timeout_ns) {
        state_[i].store(kSilent);
        failed_.store(true, std::memory_order_release);
        continue;
      }
      fds.push_back(pollfd{control_[i].get(), POLLIN, 0});
      who.push_back(static_cast<int>(i));
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_beat - Clock::now()).count();
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(1, wait))) <= 0) continue;
    for (size_t k = 1; k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      const int peer = who[k];
      char buf[256];
      const ssize_t r = ::recv(fds[k].fd, buf, sizeof buf, MSG_DONTWAIT);
      if (r > 0) {
        last_seen_ns_[peer].store(now_ns());
        if (buf[r - 1] == kBye) state_[peer].store(kLeft);
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        state_[peer].store(kCrashed);
        failed_.store(true, std::memory_order_release);
      }
    }
  }
}

int PeerMonitor::failed_peer() const {
  for (size_t i = 0; i < control_.size(); ++i) {
    const int s = state_[i].load();
    if (s == kCrashed || s == kSilent) return static_cast<int>(i);
  }
  return -1;
}

bool PeerMonitor::healthy(int peer) const {
  if (peer >= 0 && state_[peer].load(std::memory_order_acquire) != kAlive) return false;
  return !failed_.load(std::memory_order_acquire);
}

void PeerMonitor::raise(int peer, const std::string& during) const {
  if (peer < 0 || state_[peer].load() == kAlive) {
    for (size_t i = 0; i < control_.size(); ++i) {
      const int s = state_[i].load();
      if (s == kCrashed || s == kSilent) peer = static_cast<int>(i);
    }
  }
  if (peer < 0) throw CommError("peer monitor: no failed peer to report during " + during);
  const int s = state_[peer].load();
  std::string why;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", timeout_s_);
  if (s == kLeft)
    why = "left the group (exited normally)";
  else if (s == kSilent)
    why = std::string("stopped answering for ") + secs + " s";
  else
    why = "closed its connection (it exited or crashed)";
  throw CommError("rank " + names_[peer] + " " + why + " during " + during + " (seen by rank " +
                  std::to_string(rank_) + ")");
}

}  // namespace orchard::dist::net
