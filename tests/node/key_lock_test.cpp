// One agent per identity key (issue 26): a second lock on the same key fails naming the key and
// the holder's pid, and the key is free again once the first lets go.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "node/key_lock.h"
#include "tensor/error.h"

namespace orchard::node {
namespace {

TEST(KeyLock, ASecondAgentOnTheSameKeyIsRefusedWhileTheFirstRuns) {
  const auto dir = std::filesystem::temp_directory_path() / ("orchard-key-lock-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto key = dir / "node" / "node.key";  // the folder does not exist yet
  std::optional<KeyLock> first = KeyLock::acquire(key);
  try {
    KeyLock second = KeyLock::acquire(key);
    FAIL() << "two agents hold one key";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(key.string()), std::string::npos) << m;
    EXPECT_NE(m.find("pid " + std::to_string(::getpid())), std::string::npos) << m;
    EXPECT_NE(m.find("--key"), std::string::npos) << m;
  }
  const KeyLock other = KeyLock::acquire(dir / "other.key");  // another key is another agent
  first.reset();
  const KeyLock again = KeyLock::acquire(key);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace orchard::node
