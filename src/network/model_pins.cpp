#include "network/model_pins.h"

#include <chrono>

#include "network/protocol_names.h"
#include "tensor/error.h"

namespace orchard::network {
namespace {

constexpr const char* kPinsSchema = R"sql(
CREATE TABLE IF NOT EXISTS model_pins(
  name TEXT PRIMARY KEY,
  sha256 TEXT NOT NULL,
  file_bytes INTEGER NOT NULL,
  pinned_at INTEGER NOT NULL);
)sql";

// 2: the file's description (version 1 stores gain an empty one).
constexpr const char* kDescription = "ALTER TABLE model_pins ADD COLUMN description TEXT NOT NULL DEFAULT '';";

const std::string& schema_v2() {
  static const std::string s = std::string(kPinsSchema) + kDescription;
  return s;
}

ModelPin read_pin(const sql::Stmt& s) {
  ModelPin p{s.text(0), s.text(1), static_cast<uint64_t>(s.i64(2)), s.i64(3), std::nullopt};
  // Written by pin() from a checked description.
  if (!s.text(4).empty()) p.description = model_info_from_json(nlohmann::json::parse(s.text(4)));
  return p;
}

constexpr const char* kColumns = "name, sha256, file_bytes, pinned_at, description";

}  // namespace

void describe_as_pinned(std::vector<ModelInfo>& models,
                        const std::function<std::optional<ModelPin>(const std::string&)>& find) {
  for (ModelInfo& m : models) {
    const auto pin = find(m.name);
    if (!pin || !pin->description) continue;
    const std::string name = m.name, sha = m.sha256;
    m = *pin->description;
    m.name = name;
    m.shape.name = name;
    m.sha256 = sha;
  }
}

ModelPins ModelPins::open(const std::string& location) {
  sql::FileKind kind{"model pin store", "orchard-model-pins", "2", schema_v2().c_str()};
  static constexpr sql::FileKind::Upgrade kUpgrades[] = {{"1", kDescription}};
  kind.upgrades = kUpgrades;
  return ModelPins(sql::open_database(location, kind));
}

void ModelPins::pin(const ModelPin& p) {
  if (p.name.empty()) throw Error("pinning a model: the name is empty");
  if (!protocol::is_sha256_hex(p.sha256)) throw Error("pinning '" + p.name + "': '" + p.sha256 + "' is not 64 lowercase hex digits");
  const int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Checked by a round trip: what registration will read back.
  const std::string description = p.description ? to_json(model_info_from_json(to_json(*p.description))).dump() : "";
  sql::Stmt s(*db_,
              "INSERT INTO model_pins(name, sha256, file_bytes, pinned_at, description) VALUES(?1, ?2, ?3, ?4, ?5) "
              "ON CONFLICT(name) DO UPDATE SET sha256 = excluded.sha256, file_bytes = excluded.file_bytes, "
              "pinned_at = excluded.pinned_at, description = excluded.description");
  s.bind(1, p.name).bind(2, p.sha256).bind(3, static_cast<int64_t>(p.file_bytes)).bind(4, now).bind(5, description).step();
}

bool ModelPins::unpin(const std::string& name) {
  sql::Stmt s(*db_, "DELETE FROM model_pins WHERE name = ?1");
  return s.bind(1, name).changes() == 1;
}

std::optional<ModelPin> ModelPins::find(const std::string& name) {
  sql::Stmt s(*db_, std::string("SELECT ") + kColumns + " FROM model_pins WHERE name = ?1");
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  return read_pin(s);
}

std::vector<ModelPin> ModelPins::list() {
  sql::Stmt s(*db_, std::string("SELECT ") + kColumns + " FROM model_pins ORDER BY name");
  std::vector<ModelPin> out;
  while (s.step()) out.push_back(read_pin(s));
  return out;
}

}  // namespace orchard::network
