#include "dist/discovery/membership.h"

#include <algorithm>

namespace orchard::dist::discovery {
namespace {

constexpr size_t kMaxRememberedIds = 4096;

std::string who(const Announcement& a) { return "'" + a.name + "' (" + a.id + ")"; }

}  // namespace

Membership::Membership(std::string self_id, std::string version, int64_t timeout_ms)
    : self_(std::move(self_id)), version_(std::move(version)), timeout_ms_(timeout_ms) {}

Observation Membership::observe(const Announcement& a, const std::string& from, const std::string& local,
                                int64_t now_ms) {
  if (a.id == self_) return {Observation::Self, {}};
  const auto seen = last_seq_.find(a.id);
  // Equal counters arrive once per interface the member announced on: the same announcement.
  if (seen != last_seq_.end() && a.seq < seen->second) return {Observation::Replayed, {}};
  if (last_seq_.size() >= kMaxRememberedIds && seen == last_seq_.end())
    std::erase_if(last_seq_, [&](const auto& kv) { return !members_.count(kv.first); });
  last_seq_[a.id] = a.seq;

  if (a.version != version_) {
    std::string message = "refused " + who(a) + " from " + from + ": it runs orchard " + a.version +
                          ", this machine runs orchard " + version_ + " (run the same version on every member)";
    const bool first = refused_.emplace(a.id, message).second;
    return {Observation::Refused, first ? std::move(message) : std::string()};
  }
  auto it = members_.find(a.id);
  if (a.leaving) {
    if (it == members_.end()) return {Observation::Replayed, {}};
    members_.erase(it);
    ++generation_;
    return {Observation::Left, who(a) + " left the cluster"};
  }
  const bool joined = it == members_.end();
  if (joined) {
    it = members_.emplace(a.id, Member{}).first;
    it->second.first_seen_ms = now_ms;
    ++generation_;
  }
  Member& m = it->second;
  m.announcement = a;
  m.last_seen_ms = now_ms;
  auto path = std::find_if(m.paths.begin(), m.paths.end(),
                           [&](const MemberPath& p) { return p.address == from && p.local == local; });
  if (path == m.paths.end()) {
    m.paths.push_back({from, local, now_ms});
    std::sort(m.paths.begin(), m.paths.end(),
              [](const MemberPath& x, const MemberPath& y) { return std::tie(x.address, x.local) < std::tie(y.address, y.local); });
  } else {
    path->last_seen_ms = now_ms;
  }
  if (!joined) return {Observation::Updated, {}};
  return {Observation::Joined, who(a) + " joined from " + from + " (orchard " + a.version + ", " +
                                   std::to_string(a.cores) + " cores, " +
                                   std::to_string(a.memory_bytes >> 30) + " GiB)"};
}

std::vector<std::string> Membership::expire(int64_t now_ms) {
  std::vector<std::string> gone;
  for (auto it = members_.begin(); it != members_.end();) {
    Member& m = it->second;
    std::erase_if(m.paths, [&](const MemberPath& p) { return now_ms - p.last_seen_ms > timeout_ms_; });
    if (now_ms - m.last_seen_ms > timeout_ms_) {
      gone.push_back(who(m.announcement) + " left the cluster: not heard from for " +
                     std::to_string(now_ms - m.last_seen_ms) + " ms (timeout " + std::to_string(timeout_ms_) + " ms)");
      it = members_.erase(it);
      ++generation_;
    } else {
      ++it;
    }
  }
  return gone;
}

}  // namespace orchard::dist::discovery
