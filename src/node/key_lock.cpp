#include "node/key_lock.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "platform/platform.h"
#include "tensor/error.h"

namespace orchard::node {

KeyLock KeyLock::acquire(const std::filesystem::path& key_path) {
  const std::filesystem::path lock = key_path.string() + ".lock";
  std::error_code ec;
  if (lock.has_parent_path()) std::filesystem::create_directories(lock.parent_path(), ec);
  const int fd = platform::lock_file(lock.string());
  if (fd < 0) {
    if (errno != EWOULDBLOCK) throw Error("cannot lock " + lock.string() + ": " + std::strerror(errno));
    std::string holder;
    std::ifstream(lock) >> holder;
    throw Error("another orchard node" + (holder.empty() ? std::string() : " (pid " + holder + ")") +
                " is running with the key " + key_path.string() +
                ": one agent per key — give this one its own (orchard node --key PATH)");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  // The pid is for the message above; the lock is what counts, so a failed write is no error.
  [[maybe_unused]] const bool noted =
      ::ftruncate(fd, 0) == 0 && ::write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
  return KeyLock(fd);
}

KeyLock::~KeyLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace orchard::node
