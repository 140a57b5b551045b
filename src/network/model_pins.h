#pragma once
// Models matched by content, not by name (issue 26): the operator pins a model name to the
// SHA-256 of the file it means (`orchard network model pin NAME FILE`), and a node offering that
// name with other bytes — another quantization, another model — is refused at registration,
// naming both hashes. Unpinned names are taken as the nodes describe them.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "network/database.h"

namespace orchard::network {

struct ModelPin {
  std::string name, sha256;
  uint64_t file_bytes = 0;
  int64_t pinned_at = 0;  // Unix ms
};

class ModelPins {
 public:
  // Opens (creating when absent or empty) the pin store at `location`: an SQLite file's path or
  // a PostgreSQL URL. Throws orchard::Error naming it when it holds something else.
  static ModelPins open(const std::string& location);
  // Pins (or re-pins) `name`; throws orchard::Error for an empty name or a malformed hash.
  void pin(const ModelPin& p);
  // True when `name` was pinned and is no longer.
  bool unpin(const std::string& name);
  std::optional<ModelPin> find(const std::string& name);
  std::vector<ModelPin> list();

 private:
  explicit ModelPins(std::unique_ptr<sql::Connection> db) : db_(std::move(db)) {}
  std::unique_ptr<sql::Connection> db_;
};

}  // namespace orchard::network
