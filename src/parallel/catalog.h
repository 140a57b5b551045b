#pragma once
// What the planner knows about machines and links: the built-in catalogs (data/catalog/*.json,
// compiled in: Apple silicon from published specifications, links from published
// measurements) and node descriptions measured by `orchard plan --calibrate`.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tensor/types.h"

namespace orchard::parallel {

// A measured quantity by thread (or rank) count; between and beyond the measured counts it
// takes the nearest measured count's value, scaled linearly when the count lies below it.
struct ByCount {
  std::map<int, double> at_count;
  bool empty() const { return at_count.empty(); }
  double at(int n) const;
};

// One all_sum between ranks over a link: latency_us + bytes / (gbs · 1e9) seconds. Measured
// on one machine, also what a sync and a hop cost when the ranks compute between messages
// (waking a sleeping rank, sharing cores): sync_us per all_sum among busy ranks, hop_us per
// message that passes a token from one stage to the next. 0: not measured, use latency_us.
struct LinkFit {
  double latency_us = 0;
  double gbs = 1;
  double sync_us = 0, hop_us = 0;
  double seconds(double bytes) const { return latency_us * 1e-6 + bytes / (gbs * 1e9); }
  double sync_seconds(double bytes) const { return (sync_us > 0 ? sync_us : latency_us) * 1e-6 + bytes / (gbs * 1e9); }
  double hop_seconds(double bytes) const { return (hop_us > 0 ? hop_us : latency_us) * 1e-6 + bytes / (gbs * 1e9); }
};

struct MachineSpec {
  std::string id, name, tier, source;
  std::vector<double> memory_gib;  // sizes offered (catalog) or installed (measured)
  double mem_bw_gbs = 0;           // peak read bandwidth: specification or measured with every core
  double gpu_tflops = 0;           // FP32, the whole GPU
  int gpu_cores = 0;
  std::string cpu_cores;
  int thunderbolt = 0;
  bool rdma = false;               // RDMA over Thunderbolt 5 possible
  double idle_w = 0, load_w = 0;   // 0: unknown
  std::string power_of;            // which machine the power figures were measured on
  double gen_efficiency = 0.7;     // share of mem_bw generation reaches
  double prefill_efficiency = 0.6; // share of gpu_tflops prompt processing reaches
  double usable_memory = 0.75;     // share of memory a model may take
  double layer_overhead_us = 0;    // fixed cost per layer per token (GPU kernel launches, …)
  double collective_us = 0;        // the accelerator's stop-and-sync cost per collective
  // Extra fixed cost per mixture-of-experts layer per token, on top of layer_overhead_us:
  // routing, gathering the chosen experts and their many small kernels (fitted, see the catalog).
  double moe_layer_overhead_us = 0;

  // Measured CPU nodes (orchard plan --calibrate): rates by thread count.
  bool measured = false;
  int cores = 0;
  ByCount membw_gbs;                         // streaming read bandwidth
  std::map<DType, ByCount> matvec_gbs;       // weight bytes/s of one-token matrix-vector products
  std::map<DType, ByCount> matmul_gflops;    // FLOP/s of 64-token matrix products (prefill)
  ByCount sync_us;                           // one fork/join of the thread pool
  ByCount layer_us;                          // a forward pass's work per layer beyond its matrix
                                             // products (norms, RoPE, attention, imbalance),
  double layer_us_dim = 0;                   // measured at this model width; scales with width
  // all_sum between ranks on this machine, by backend ("shm", "tcp", "tcp+300" for a tcp link
  // with 300 µs emulated) and rank count.
  std::map<std::string, std::map<int, LinkFit>> local_allsum;

  bool has_power() const { return load_w > 0; }
};

struct LinkSpec {
  std::string id, name;
  double latency_us = 0, gbs = 0;
  int max_cables = 1;
  bool rdma = false;
};

class Catalog {
 public:
  // The compiled-in catalogs.
  static const Catalog& builtin();
  // Parses catalog JSON texts; throws orchard::Error naming the entry and field.
  static Catalog parse(const std::string& machines_json, const std::string& links_json);

  const std::vector<MachineSpec>& machines() const { return machines_; }
  const std::vector<LinkSpec>& links() const { return links_; }
  // Throws orchard::Error listing the known ids when `id` is unknown.
  const MachineSpec& machine(const std::string& id) const;
  const LinkSpec& link(const std::string& id) const;

 private:
  void fill(const nlohmann::json& machines, const nlohmann::json& links);
  std::vector<MachineSpec> machines_;
  std::vector<LinkSpec> links_;
};

// Node descriptions as written by --calibrate (and accepted inline in a cluster file).
MachineSpec machine_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json machine_to_json(const MachineSpec& m);

}  // namespace orchard::parallel
