#pragma once
// Nodes for the placement and job store tests: plain CPU machines described by memory and
// bandwidth (no catalog chip, so the predictions follow the numbers given here alone), models
// by the planner's known shapes.
#include <string>
#include <vector>

#include "network/protocol_names.h"
#include "network/placement.h"

namespace orchard::network::testing {

inline constexpr uint64_t kGiB = uint64_t{1} << 30;

inline MachineInfo machine(const std::string& name, double gib, double bw_gbs, int cores = 16) {
  MachineInfo m;
  m.name = name;
  m.chip = "x86-test";
  m.memory_bytes = static_cast<uint64_t>(gib * static_cast<double>(kGiB));
  m.mem_bw_gbs = bw_gbs;
  m.cores = cores;
  return m;
}

// "llama-3.1-8b" (about 4.5 GB in Q4_0) or "llama-3.3-70b" (about 40 GB), under `name`.
inline ModelInfo model(const std::string& name, const std::string& spec) {
  ModelInfo m;
  m.name = name;
  m.spec = spec;
  m.shape = parallel::model_spec(spec, DType::Q4_0);
  m.shape.name = name;
  return m;
}

inline const ModelInfo kSmall = model("small-8b", "llama-3.1-8b");
inline const ModelInfo kBig = model("big-70b", "llama-3.3-70b");

inline NodeInfo single(const std::string& id, double gib, double bw_gbs, std::vector<ModelInfo> models = {kSmall, kBig}) {
  NodeInfo n;
  n.id = id;
  n.owner = "owner-" + id;
  n.hardware = HardwareClass::Desktop;
  n.machines = {machine(id + "-m", gib, bw_gbs)};
  n.models = std::move(models);
  n.max_context = 32768;
  return n;
}

// `count` machines of `gib` each, cabled together over 10 GbE.
inline NodeInfo group(const std::string& id, int count, double gib, double bw_gbs,
                      std::vector<ModelInfo> models = {kSmall, kBig}) {
  NodeInfo n = single(id, gib, bw_gbs, std::move(models));
  n.machines.clear();
  CabledGroup g;
  for (int i = 0; i < count; ++i) {
    n.machines.push_back(machine(id + "-m" + std::to_string(i), gib, bw_gbs));
    g.members.push_back(n.machines.back().name);
  }
  g.link = "10gbe-test";
  g.latency_us = 40;
  g.gbs = 1.1;
  n.group = g;
  return n;
}

inline NodeView view(NodeInfo info, int64_t last_heartbeat_ms, double reliability = 1.0) {
  NodeView v;
  v.info = std::move(info);
  v.last_heartbeat_ms = last_heartbeat_ms;
  v.reliability = reliability;
  return v;
}

}  // namespace orchard::network::testing
