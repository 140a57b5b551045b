#pragma once
// A model file's SHA-256 without reading 40 GB at every start: remembered per file, keyed by its
// absolute path, size and modification time (any change to the file changes one of them), in
// ~/.cache/orchard/node/model-hashes.json. A missing, unreadable or malformed cache only means
// hashing again; a cache that cannot be written is left alone.
#include <filesystem>
#include <string>

namespace orchard::node {

// `cache_file` empty: the default under orchard_home().
std::string model_sha256(const std::filesystem::path& model, std::filesystem::path cache_file = {});

}  // namespace orchard::node
