#pragma once
// What a machine running `orchard cluster up` tells the local networks about itself, about twice
// a second: who it is, what it can give, where its agent listens. Every announcement is signed
// with the cluster's secret (HMAC-SHA256), so a stranger on the same network can neither join
// nor forge a member; one replayed later is refused by its counter (see Membership).
//
// On the wire (one UDP datagram): "ORCHARD-CLUSTER <64 hex digits of MAC> <JSON>", the MAC over
// the JSON text. The envelope never changes between versions, so a member of another version is
// still recognised — and refused by name — instead of being mistaken for a stranger.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orchard::dist::discovery {

// The largest announcement sent or read: one unfragmented datagram on any Ethernet.
constexpr size_t kMaxAnnouncementBytes = 1400;

struct Announcement {
  std::string id;       // random at each start of the agent: 16 hex digits
  std::string name;     // the host name, for people
  std::string version;  // the orchard version that sent it
  uint16_t control_port = 0;  // the agent's HTTP port (status, link lists)
  uint16_t probe_port = 0;    // where it answers link probes (dist/link_probe.h)
  std::vector<std::string> addresses;  // its IPv4 addresses, one per interface it announces on
  uint64_t memory_bytes = 0;     // installed
  uint64_t available_bytes = 0;  // free for a model now
  int cores = 0;
  std::vector<std::string> rdma;  // RDMA device names
  std::string model;              // the model file's name ("" when it serves none)
  uint64_t model_bytes = 0;
  uint64_t started_ms = 0;  // when the agent started (Unix ms): the longest-standing member leads
  bool calibrated = false;  // its agent answers GET /cluster/machine with `orchard plan --calibrate`'s file
  uint64_t seq = 0;      // counts this agent's announcements; a smaller one is a replay
  bool leaving = false;  // the agent is stopping: forget it now rather than at its timeout
};

// The datagram for `a`, signed with `secret`. Throws orchard::Error if it would not fit.
std::string encode_announcement(const Announcement& a, const std::string& secret);
// The envelope around any JSON text, signed (what encode_announcement writes; the fuzzer signs
// arbitrary text with it to reach the checks behind the MAC).
std::string sign_announcement_json(std::string_view json, const std::string& secret);

struct DecodedAnnouncement {
  std::optional<Announcement> announcement;
  // Why there is none: "not an orchard announcement", "not signed with this cluster's secret",
  // or the malformed field.
  std::string error;
  bool stranger = false;  // an orchard announcement whose MAC this secret does not match
};

// Never throws: every datagram on the port is outside input.
DecodedAnnouncement decode_announcement(std::string_view datagram, const std::string& secret);

}  // namespace orchard::dist::discovery
