#pragma once
// A model file's identity on the network: SHA-256 of its bytes, as a node reports it
// (ModelInfo::sha256) and as an operator pins a name to it (`orchard network model pin`).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace orchard::protocol {

// 64 lowercase hex digits. `progress(done, total)` is called every 1 GiB read (hashing a large
// model takes seconds per gigabyte). Throws orchard::Error naming the file when it cannot be read.
std::string file_sha256(const std::filesystem::path& path,
                        const std::function<void(uint64_t done, uint64_t total)>& progress = {});

}  // namespace orchard::protocol
