#pragma once
// One agent per identity key: `orchard node` holds an exclusive lock beside its key for as long
// as it runs, so a second agent started on the same key (two owners on one machine sharing the
// default key, say) stops at once with a message instead of registering as the same node and
// taking the first one's jobs and credits (issue 26). The coordinator refuses the same thing
// across machines (network/job_store.h, register_node).
#include <filesystem>
#include <string>

namespace orchard::node {

class KeyLock {
 public:
  // Locks `<key_path>.lock` (created beside the key; it records the holder's pid). Throws
  // orchard::Error naming the key, and the pid holding it, when another agent runs on it.
  static KeyLock acquire(const std::filesystem::path& key_path);
  KeyLock(KeyLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  KeyLock& operator=(KeyLock&&) = delete;
  KeyLock(const KeyLock&) = delete;
  ~KeyLock();

 private:
  explicit KeyLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace orchard::node
