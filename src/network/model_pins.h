#pragma once
// Models matched by content, not by name (issue 26): the operator pins a model name to the
// SHA-256 of the file it means (`orchard network model pin NAME FILE`), and a node offering that
// name with other bytes — another quantization, another model — is refused at registration,
// naming both hashes; a pin made from the file also carries its description, which replaces
// the node's. Unpinned names are taken as the nodes describe them.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "network/database.h"
#include "network/protocol_names.h"

namespace orchard::network {

struct ModelPin {
  std::string name, sha256;
  uint64_t file_bytes = 0;
  int64_t pinned_at = 0;  // Unix ms
  // The file's shape and format as the operator's `model pin` read them from its GGUF header.
  // Registration then describes the name by this, not by what the node says: the job size
  // class (and the memory placement plans for) come from the pinned bytes. Absent for a pin
  // made from a hash alone.
  std::optional<ModelInfo> description;
};

// Replaces the description of every model in `models` whose name `find` has a pin with a
// description for: shape, spec, format and size become the pinned file's (name and the node's
// sha256 stay; registration refuses another sha256 before this).
void describe_as_pinned(std::vector<ModelInfo>& models,
                        const std::function<std::optional<ModelPin>(const std::string&)>& find);

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
