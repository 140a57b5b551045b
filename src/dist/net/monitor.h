#pragma once
// Failure detector. Each rank keeps one control connection per peer that
// carries nothing but heartbeats; a background thread sends one every
// interval and watches the others. A peer whose connection drops without a
// goodbye crashed; a peer silent for the timeout stopped answering. Waits
// anywhere in the backend call check() so they fail instead of hanging.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/net/socket.h"

namespace orchard::dist::net {

class PeerMonitor {
 public:
  // control[r] is the control socket to rank r (empty for this rank).
  PeerMonitor(int rank, std::vector<Fd> control, std::vector<std::string> names, double timeout_s);
  ~PeerMonitor();
  PeerMonitor(const PeerMonitor&) = delete;
  PeerMonitor& operator=(const PeerMonitor&) = delete;

  // False if a peer crashed or went silent, or if `peer` (when >= 0) left
  // cleanly. Cheap (atomic loads): waits call it while spinning.
  bool healthy(int peer) const;
  // Throws the CommError that explains why healthy(peer) was false; `during`
  // names the operation being waited on.
  [[noreturn]] void raise(int peer, const std::string& during) const;
  void check(int peer, const std::string& during) const {
    if (!healthy(peer)) raise(peer, during);
  }
  // True once any peer is known to have failed (not a clean goodbye).
  bool any_failed() const { return failed_.load(std::memory_order_acquire); }
  // A peer that crashed or went silent (the lowest rank), or -1.
  int failed_peer() const;
  double timeout_s() const { return timeout_s_; }
  // Tells the peers this rank leaves on purpose, then stops the thread.
  void goodbye();

 private:
  enum State : int { kAlive = 0, kLeft = 1, kCrashed = 2, kSilent = 3 };
  void run();

  int rank_;
  std::vector<Fd> control_;
  std::vector<std::string> names_;
  double timeout_s_;
  std::unique_ptr<std::atomic<int>[]> state_;
  std::unique_ptr<std::atomic<int64_t>[]> last_seen_ns_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> stop_{false};
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace orchard::dist::net
