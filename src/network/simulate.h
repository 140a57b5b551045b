#pragma once
// `orchard network simulate`: the real job store and placement, with simulated nodes — how
// long registering N nodes takes, and placing M jobs among them (docs/network.md, "Scale").
// Each job is submitted and placed as a client's is, then taken and completed at once by its
// node so the next finds it free; only the placement is timed.
#include <cstdint>
#include <functional>
#include <string>

namespace orchard::network {

struct SimulateOptions {
  int nodes = 1000;
  int jobs = 1000;
  std::string store;  // an SQLite file (made when absent) or a postgresql:// URL
  uint64_t seed = 1;
};

struct SimulateReport {
  int nodes = 0, jobs = 0, placed = 0, waiting = 0, failed = 0;
  double register_s = 0;        // registering every node
  double place_s = 0;           // the placements alone, summed
  double placements_per_s = 0;  // jobs / place_s
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  double peak_rss_mib = 0;      // this process's, at the end
};

// `progress` gets a line now and then. Throws orchard::Error when the store cannot be opened.
SimulateReport simulate(const SimulateOptions& o, const std::function<void(const std::string&)>& progress = {});

}  // namespace orchard::network
