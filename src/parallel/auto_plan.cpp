#include "parallel/auto_plan.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include "dist/config.h"
#include "model/gguf.h"
#include "platform/platform.h"
#include "tensor/error.h"

namespace orchard::parallel {

MachineSpec rough_machine(int cores, double memory_gib) {
  MachineSpec m;
  m.id = "this-machine";
  m.name = "this machine (not calibrated)";
  m.measured = true;
  m.cores = std::max(1, cores);
  m.memory_gib = {memory_gib};
  m.usable_memory = 0.9;
  m.membw_gbs.at_count[m.cores] = 20;
  m.matmul_gflops[DType::F32].at_count[m.cores] = 100;
  m.local_allsum["shm"][2] = LinkFit{2, 5, 5, 5};
  m.local_allsum["tcp"][2] = LinkFit{10, 2, 20, 20};
  return m;
}

std::string default_node_file() {
  if (const char* f = std::getenv("ORCHARD_NODE_FILE"); f && *f) return f;
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  const std::string base = xdg && *xdg ? xdg : std::string(home ? home : ".") + "/.config";
  return base + "/orchard/node.json";
}

AutoChoice choose_split(dist::Group& world, const std::string& model_path, const std::vector<uint64_t>& budgets,
                        int threads, const PredictOptions& options) {
  const int n = world.size();
  // Which ranks share a machine: by host name, in rank order.
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  std::vector<char> hosts(static_cast<size_t>(n) * sizeof host);
  world.all_gather(host, hosts.data(), sizeof host);
  int decision[2] = {0, 1};
  std::string why;
  std::exception_ptr failed;
  if (world.rank() == 0) try {
    auto file = GGUFFile::open(model_path, GGUFLoad::Map);
    const ModelCost cost = ModelCost::from_gguf(*file);
    NodeSpec base;
    const std::string node_file = default_node_file();
    const bool calibrated = std::filesystem::exists(node_file);
    if (calibrated) base = measured_node(node_file);
    else {
      base.machine = rough_machine(static_cast<int>(std::thread::hardware_concurrency()),
                                   static_cast<double>(platform::physical_memory_bytes()) / 1073741824.0);
      base.memory_gib = base.machine.memory_gib[0];
      base.name = "this-machine";
    }
    base.threads = threads;
    ClusterSpec cl;
    const dist::Config cfg = dist::Config::from_env();
    cl.local_backend = world.backend();
    cl.local_extra_latency_us = cfg.link_latency_us;
    // A job across machines talks over their network: assume 10 GbE unless calibrated better.
    cl.link.spec = Catalog::builtin().link("eth-10g");
    cl.link.spec.latency_us += cfg.link_latency_us;
    for (int r = 0; r < n; ++r) {
      const char* h = hosts.data() + static_cast<size_t>(r) * sizeof host;
      if (r == 0 || std::strncmp(h, hosts.data() + static_cast<size_t>(r - 1) * sizeof host, sizeof host) != 0) {
        cl.nodes.push_back(base);
        cl.nodes.back().name = h;
        cl.nodes.back().ranks = 0;
        cl.nodes.back().memory_gib = 0;
      }
      NodeSpec& node = cl.nodes.back();
      ++node.ranks;
      node.memory_gib += budgets.empty() ? base.memory_gib / std::max(1, n)
                                         : static_cast<double>(budgets[static_cast<size_t>(r)]) / 1073741824.0 /
                                               node.machine.usable_memory;
    }
    if (budgets.empty() && cl.nodes.size() == 1) cl.nodes[0].memory_gib = base.memory_gib;
    // Only splits over all the job's ranks (the job has already been started with them) that
    // the engine can run.
    std::vector<Prediction> all = rank_plans(cost, cl, options);
    const Prediction* best = nullptr;
    for (const Prediction& p : all)
      if (p.candidate.n_nodes == static_cast<int>(cl.nodes.size()) && p.unsupported.empty() &&
          (!best || (p.fits && !best->fits)))
        best = &p;
    if (!best) throw Error("the planner found no split of " + cost.name + " over " + std::to_string(n) + " ranks");
    decision[0] = static_cast<int>(best->candidate.kind);
    decision[1] = best->candidate.tp;
    char buf[256];
    std::snprintf(buf, sizeof buf, "planner chose %s (predicted %.1f tokens/s, TTFT %.0f ms; %s)\n",
                  best->candidate.label().c_str(), best->tg_tps, best->ttft_s * 1e3,
                  calibrated ? ("machine from " + node_file).c_str()
                             : "machine not calibrated: run `orchard plan --calibrate` for better choices");
    why = buf;
  } catch (...) {
    failed = std::current_exception();
    decision[0] = -1;
  }
  world.broadcast(decision, sizeof decision, 0);
  if (failed) std::rethrow_exception(failed);
  if (decision[0] < 0) throw Error("rank 0 could not choose a split (its error says why)");
  AutoChoice c;
  c.kind = static_cast<Kind>(decision[0]);
  c.tp = decision[1];
  c.why = why;
  return c;
}

}  // namespace orchard::parallel
