#pragma once
// What a node tells the coordinator about itself: its machines, the cable between them when it
// is a group, the models it holds, how it lends itself, and (with every heartbeat) its load.
//
// A node is the unit a job goes to, whole: one machine, or one group of machines already cabled
// together and able to run one model split across them. The coordinator never combines the
// machines of two nodes, so a group is described here, by the node, not inferred.
//
// As JSON (what a node sends when it registers):
//   {"id": "studio-pair", "owner": "alice", "hardware": "workstation",
//    "machines": [{"name": "studio-1", "chip": "m3-ultra", "memory_bytes": 274877906944,
//                  "mem_bw_gbs": 819, "cores": 32},
//                 {"name": "studio-2", "chip": "m3-ultra", "memory_bytes": 274877906944,
//                  "mem_bw_gbs": 819, "cores": 32}],
//    "group": {"members": ["studio-1", "studio-2"], "link": "tb5-rdma", "latency_us": 12, "gbs": 5},
//    "models": [{"name": "llama-3.3-70b-q4", "file_bytes": 39969475584,
//                "shape": {"layers": 80, "dim": 8192, "heads": 64, "kv_heads": 8, "ffn_dim": 28672,
//                          "vocab": 128256, "type": "q4_0"}},
//               {"name": "llama-3.1-8b-q8", "file_bytes": 8540000000, "spec": "llama-3.1-8b", "type": "q8_0"}],
//    "max_context": 32768, "max_jobs": 1, "lending": "when-idle", "load": 0.1, "status": "available"}
// A model gives its shape (the numbers the planner's ModelCost needs) or names a shape the
// planner knows (`spec`, parallel::model_spec), looked up when the description is read so an
// unknown name is refused at registration, not at the first job.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/credits.h"
#include "protocol/regions.h"
#include "parallel/model_cost.h"

namespace orchard::protocol {

struct MachineInfo {
  std::string name;         // unique within the node
  std::string chip;         // free text; a catalog id ("m3-ultra") brings its efficiencies and compute
  uint64_t memory_bytes = 0;
  double mem_bw_gbs = 0;    // peak read bandwidth, GB/s: what generation speed follows
  int cores = 0;
  double tflops = 0;        // prompt compute; 0: the catalog's for a known chip, else estimated from cores
};

// The cable between the machines of a group, as the node measured it.
struct CabledGroup {
  std::vector<std::string> members;  // machine names: every machine of the node, once
  std::string link;                  // "tb5-rdma", "10gbe", …; a catalog id fills an unmeasured figure
  double latency_us = 0;             // one small message, one way
  double gbs = 0;                    // payload bandwidth
};

struct ModelInfo {
  std::string name;  // what jobs ask for
  uint64_t file_bytes = 0;
  parallel::ModelSpec shape;  // the numbers the planner needs (looked up when the node named `spec`)
  std::string spec;           // the planner's name for the shape, when the node gave a name
  // SHA-256 of the GGUF file, 64 lowercase hex digits (empty: not given). What the coordinator
  // matches against a name its operator pinned (network/model_pins.h): the same name with other
  // bytes (another quantization, another model) is refused.
  std::string sha256;
};

// True for 64 lowercase hex digits.
bool is_sha256_hex(std::string_view s);

enum class Lending { Dedicated, WhenIdle };
enum class NodeStatus { Available, Busy, Draining };

// What every heartbeat carries.
struct HeartbeatState {
  double load = 0;  // 0 idle … 1 fully used (by its owner or by jobs)
  NodeStatus status = NodeStatus::Available;
  // The jobs the node is still working on. When given, a heartbeat extends only their leases,
  // so a job the node dropped while staying alive runs out of lease and is re-assigned.
  std::optional<std::vector<std::string>> running;
};

struct NodeInfo {
  std::string id, owner;
  HardwareClass hardware = HardwareClass::Laptop;  // what it calls itself (shown; the price class is measured)
  std::vector<MachineInfo> machines;               // one, or the members of `group`
  std::optional<CabledGroup> group;
  std::vector<ModelInfo> models;
  int64_t max_context = 0;  // the longest context it accepts
  int max_jobs = 1;         // jobs it runs at once
  Lending lending = Lending::WhenIdle;
  HeartbeatState state;
  std::optional<Region> region;  // where its owner says it is (regions.h); the world page's map

  const ModelInfo* find_model(std::string_view name) const;
};

const char* to_string(Lending l);
const char* to_string(NodeStatus s);

// Each throws orchard::Error naming the node (when known), the field and what was expected:
//   "node 'studio-pair': machines[1].memory_bytes: expected a positive integer".
NodeInfo node_info_from_json(const nlohmann::json& j);
NodeInfo parse_node_info(std::string_view json_text);
nlohmann::json to_json(const NodeInfo& n);
// One model's description, as in a node's `models` (throws as node_info_from_json does).
nlohmann::json to_json(const ModelInfo& m);
ModelInfo model_info_from_json(const nlohmann::json& j);

HeartbeatState heartbeat_from_json(const nlohmann::json& j);
nlohmann::json to_json(const HeartbeatState& h);

}  // namespace orchard::protocol
