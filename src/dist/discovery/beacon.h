#pragma once
// One UDP socket that sends a datagram on every local network at once and hears those of the
// others: IPv4 multicast to an administratively scoped group (239.0.0.0/8 stays inside the site),
// sent out of each chosen interface in turn, plus unicast to peers named by hand for networks
// that drop multicast (some Wi-Fi access points, cloud VPCs). What arrives says which local
// address it came in on, so a receiver learns not only who is there but over which link.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dist/net/socket.h"

namespace orchard::dist::discovery {

struct BeaconOptions {
  std::string group = "239.255.77.17";
  uint16_t port = 52180;
  // Interface names to announce on; empty: every IPv4 interface that is up, loopback only when
  // `loopback` (several agents on one machine, tests).
  std::vector<std::string> interfaces;
  bool loopback = false;
  std::vector<std::string> unicast_peers;  // "host" or "host:port": sent to directly as well
};

struct BeaconInterface {
  std::string name, address;
};

struct Received {
  std::string datagram;
  std::string from;   // the sender's address on this link
  std::string local;  // the local address it arrived on ("" when unknown)
};

class Beacon {
 public:
  // Binds the port (shared with other agents on this machine) and joins the group on every
  // chosen interface. Throws CommError naming what failed.
  explicit Beacon(BeaconOptions options);
  // Sends `datagram` out of every chosen interface and to every unicast peer. Interfaces that
  // went away are skipped; ones that appeared since are joined first.
  void send(const std::string& datagram);
  // Waits up to `wait` for one datagram.
  std::optional<Received> receive(std::chrono::milliseconds wait);
  // The interfaces announced on now.
  std::vector<BeaconInterface> interfaces() const { return joined_; }

 private:
  void refresh_interfaces();
  BeaconOptions options_;
  net::Fd fd_;
  std::vector<BeaconInterface> joined_;
};

}  // namespace orchard::dist::discovery
