// A model's hash is read once per file: the cache gives the same hash without reading the file
// again, and a changed file (size or time) is hashed again; a broken cache is only a miss.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "node/model_hash_cache.h"
#include "protocol/file_hash.h"

namespace orchard::node {
namespace {

namespace fs = std::filesystem;

TEST(ModelHashCache, HashesOnceAndAgainWhenTheFileChanges) {
  const fs::path dir = fs::temp_directory_path() / ("orchard-hash-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path model = dir / "m.gguf", cache = dir / "cache" / "hashes.json";
  std::ofstream(model) << "first contents";
  const std::string first = protocol::file_sha256(model);
  EXPECT_EQ(model_sha256(model, cache), first);
  ASSERT_TRUE(fs::exists(cache));

  // The same size and time with other bytes: the cache answers (it is what it trusts), which
  // shows the file was not read again.
  const auto when = fs::last_write_time(model);
  std::ofstream(model) << "other contents";  // same length as "first contents"
  fs::last_write_time(model, when);
  EXPECT_EQ(model_sha256(model, cache), first);

  // A new time: hashed again.
  fs::last_write_time(model, when + std::chrono::seconds(5));
  const std::string second = protocol::file_sha256(model);
  EXPECT_NE(second, first);
  EXPECT_EQ(model_sha256(model, cache), second);

  // A broken cache is a miss, then repaired.
  std::ofstream(cache) << "{not json";
  EXPECT_EQ(model_sha256(model, cache), second);
  EXPECT_EQ(model_sha256(model, cache), second);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace orchard::node
