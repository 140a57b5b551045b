#include "node/model_hash_cache.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/synthetic/synthetic.h"
#include "protocol/file_hash.h"
#include "protocol/node_info.h"
#include "protocol/secure_random.h"

namespace orchard::node {

std::string model_sha256(const std::filesystem::path& model, std::filesystem::path cache_file) {
  namespace fs = std::filesystem;
  if (cache_file.empty()) cache_file = fs::path(orchard_home()) / "node" / "model-hashes.json";
  std::error_code ec;
  const fs::path abs = fs::absolute(model, ec);
  const auto size = fs::file_size(model, ec);
  const auto mtime = fs::last_write_time(model, ec).time_since_epoch().count();
  const std::string stamp = std::to_string(size) + ":" + std::to_string(mtime);

  nlohmann::json cache = nlohmann::json::object();
  if (std::ifstream in(cache_file); in) {
    cache = nlohmann::json::parse(in, nullptr, false);
    if (!cache.is_object()) cache = nlohmann::json::object();
  }
  if (!ec) {
    const auto it = cache.find(abs.string());
    if (it != cache.end() && it->is_object() && it->value("stamp", "") == stamp) {
      const std::string sha = it->value("sha256", "");
      if (protocol::is_sha256_hex(sha)) return sha;
    }
  }
  const std::string sha = protocol::file_sha256(model, [&](uint64_t done, uint64_t total) {
    std::fprintf(stderr, "orchard node: hashing %s: %.0f of %.0f GB (once; remembered in %s)\n", model.c_str(), done / 1e9,
                 total / 1e9, cache_file.c_str());
  });
  if (ec) return sha;
  cache[abs.string()] = {{"stamp", stamp}, {"sha256", sha}};
  // Written beside and renamed into place, so a concurrent reader sees the old file or the new.
  fs::create_directories(cache_file.parent_path(), ec);
  const fs::path tmp = cache_file.string() + "." + protocol::random_hex(6) + ".tmp";
  {
    std::ofstream out(tmp);
    out << cache.dump(1) << "\n";
    if (!out) {
      fs::remove(tmp, ec);
      return sha;
    }
  }
  fs::rename(tmp, cache_file, ec);
  if (ec) fs::remove(tmp, ec);
  return sha;
}

}  // namespace orchard::node
