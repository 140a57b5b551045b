#pragma once
// A described cluster: its machines (from the catalog or measured), how many ranks each runs,
// and the links between them. Read from a cluster file:
//   {"name": "studio-4",
//    "nodes": [{"machine": "m3-ultra", "memory_gib": 512, "count": 2},
//              {"machine": "m3-ultra", "memory_gib": 256, "count": 2}],
//    "link": {"type": "tb5-rdma", "cables": 1},
//    "price_kwh": 0.30}
// or, for ranks sharing this machine:
//   {"nodes": [{"file": "node.json", "ranks": 4, "threads": 1}],
//    "local": {"backend": "tcp", "extra_latency_us": 300}}
#include <string>
#include <vector>

#include "parallel/catalog.h"

namespace orchard::parallel {

struct NodeSpec {
  std::string name;
  MachineSpec machine;
  double memory_gib = 0;  // installed
  int ranks = 1;          // ranks it runs; several ranks on one machine share its cores and memory
  int threads = 0;        // per rank; 0: the machine's cores shared evenly
  double capacity_bytes() const { return memory_gib * machine.usable_memory * 1073741824.0; }
  int threads_per_rank() const;
};

struct ClusterLink {
  LinkSpec spec;
  int cables = 1;
  double latency_us() const { return spec.latency_us; }
  double gbs() const { return spec.gbs * std::max(1, std::min(cables, spec.max_cables)); }
};

struct ClusterSpec {
  std::string name;
  std::vector<NodeSpec> nodes;
  ClusterLink link;                   // between machines
  std::string local_backend = "shm";  // between ranks on one machine
  double local_extra_latency_us = 0;  // emulated latency added to every local message
  double price_kwh = 0.30;            // electricity, per kWh, for cost per million tokens

  // Throws orchard::Error naming the node or field. `base_dir` resolves "file" entries.
  static ClusterSpec parse(const std::string& json_text, const std::string& base_dir, const Catalog& catalog);
  static ClusterSpec load(const std::string& path, const Catalog& catalog);
  int total_ranks() const;
  std::string describe() const;
};

// A node from the catalog: "m3-ultra" or "m3-ultra:256" (memory in GiB; default the largest).
NodeSpec catalog_node(const Catalog& catalog, const std::string& spec);
// A node from a description written by --calibrate.
NodeSpec measured_node(const std::string& path);

}  // namespace orchard::parallel
