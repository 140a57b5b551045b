#include "network/model_pins.h"

#include <chrono>

#include "network/protocol_names.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS model_pins(
  name TEXT PRIMARY KEY,
  sha256 TEXT NOT NULL,
  file_bytes INTEGER NOT NULL,
  pinned_at INTEGER NOT NULL);
)sql";

constexpr sql::FileKind kKind{"model pin store", "orchard-model-pins", "1", kSchema};

ModelPin read_pin(const sql::Stmt& s) {
  return {s.text(0), s.text(1), static_cast<uint64_t>(s.i64(2)), s.i64(3)};
}

}  // namespace

ModelPins ModelPins::open(const std::string& location) { return ModelPins(sql::open_database(location, kKind)); }

void ModelPins::pin(const ModelPin& p) {
  if (p.name.empty()) throw Error("pinning a model: the name is empty");
  if (!protocol::is_sha256_hex(p.sha256)) throw Error("pinning '" + p.name + "': '" + p.sha256 + "' is not 64 lowercase hex digits");
  const int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  sql::Stmt s(*db_,
              "INSERT INTO model_pins(name, sha256, file_bytes, pinned_at) VALUES(?1, ?2, ?3, ?4) "
              "ON CONFLICT(name) DO UPDATE SET sha256 = excluded.sha256, file_bytes = excluded.file_bytes, "
              "pinned_at = excluded.pinned_at");
  s.bind(1, p.name).bind(2, p.sha256).bind(3, static_cast<int64_t>(p.file_bytes)).bind(4, now).step();
}

bool ModelPins::unpin(const std::string& name) {
  sql::Stmt s(*db_, "DELETE FROM model_pins WHERE name = ?1");
  return s.bind(1, name).changes() == 1;
}

std::optional<ModelPin> ModelPins::find(const std::string& name) {
  sql::Stmt s(*db_, "SELECT name, sha256, file_bytes, pinned_at FROM model_pins WHERE name = ?1");
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  return read_pin(s);
}

std::vector<ModelPin> ModelPins::list() {
  sql::Stmt s(*db_, "SELECT name, sha256, file_bytes, pinned_at FROM model_pins ORDER BY name");
  std::vector<ModelPin> out;
  while (s.step()) out.push_back(read_pin(s));
  return out;
}

}  // namespace orchard::network
