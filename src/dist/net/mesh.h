#pragma once
// Full mesh of authenticated TCP connections among the ranks of one job:
// rank 0 listens at the coordinator address, learns every rank's listening
// endpoint, hands out the table, then every pair connects directly. Each pair
// has one control connection (heartbeats, see PeerMonitor) and `channels`
// data connections. Backends other than tcp use the mesh only to rendezvous
// and to detect failures.
#include <memory>
#include <string>
#include <vector>

#include "dist/config.h"
#include "dist/net/monitor.h"
#include "dist/net/socket.h"

namespace orchard::dist::net {

// Bumped whenever the bytes on the wire change.
constexpr uint16_t kProtocolVersion = 1;

// Runs the accepting side of the handshake on a fresh connection: true and
// the peer's rank and lane when it authenticated; false (logged) otherwise.
// Exposed for the fuzzer: this is what a stranger's bytes reach first.
bool accept_handshake(int fd, const Config& config, const std::string& from, int* rank, int* lane);

class Mesh {
 public:
  static std::shared_ptr<Mesh> connect(const Config& config, int channels);
  ~Mesh();

  int rank() const { return rank_; }
  int size() const { return size_; }
  // "2 (10.0.0.3:7010)": how errors name a peer.
  const std::string& name(int r) const { return names_[r]; }
  const std::string& host(int r) const { return hosts_[r]; }
  int data_fd(int peer, int channel = 0) const { return data_[peer][channel].get(); }
  PeerMonitor& monitor() { return *monitor_; }
  const Config& config() const { return config_; }
  // Ranks sharing this rank's address: when they outnumber the cores,
  // spinning while waiting only steals time from the rank being waited on.
  int ranks_on_this_host() const;

 private:
  Mesh() = default;
  Config config_;
  int rank_ = 0, size_ = 1;
  std::vector<std::string> names_, hosts_;
  std::vector<std::vector<Fd>> data_;
  std::unique_ptr<PeerMonitor> monitor_;
};

}  // namespace orchard::dist::net
