#pragma once
// Who is in the cluster, as this machine has heard: every agent whose signed announcements
// arrive, with the links they arrived over, forgotten `timeout` after the last one (so a machine
// that vanished — unplugged, crashed, killed — is gone within a stated bound: no ghosts), or at
// once when it says it is leaving. Members of another orchard version are refused by name.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dist/discovery/announcement.h"

namespace orchard::dist::discovery {

// One way to reach a member: its address on a link this machine shares with it.
struct MemberPath {
  std::string address;  // the member's
  std::string local;    // this machine's, on the same link
  int64_t last_seen_ms = 0;
};

struct Member {
  Announcement announcement;  // the newest
  std::vector<MemberPath> paths;
  int64_t first_seen_ms = 0, last_seen_ms = 0;
};

struct Observation {
  enum Kind { Joined, Updated, Self, Replayed, Refused, Left } kind;
  std::string message;  // for the log (Joined, Refused, Left)
};

class Membership {
 public:
  Membership(std::string self_id, std::string version, int64_t timeout_ms);

  // A decoded, correctly signed announcement heard from `from` on local address `local`.
  Observation observe(const Announcement& a, const std::string& from, const std::string& local, int64_t now_ms);
  // Forgets members not heard from within the timeout (and paths not heard on); returns a log
  // line per member forgotten.
  std::vector<std::string> expire(int64_t now_ms);

  const std::map<std::string, Member>& members() const { return members_; }
  // Refused members by id: the last message about each (shown by `cluster status`).
  const std::map<std::string, std::string>& refused() const { return refused_; }
  // Bumped whenever the set of members changes (not on a refreshed announcement).
  uint64_t generation() const { return generation_; }
  int64_t timeout_ms() const { return timeout_ms_; }

 private:
  std::string self_, version_;
  int64_t timeout_ms_;
  std::map<std::string, Member> members_;
  std::map<std::string, std::string> refused_;
  // The last counter seen per id, kept after a member is forgotten so that its old
  // announcements replayed later cannot bring it back as a ghost (bounded: oldest dropped).
  std::map<std::string, uint64_t> last_seq_;
  uint64_t generation_ = 0;
};

}  // namespace orchard::dist::discovery
