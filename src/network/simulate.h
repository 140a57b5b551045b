#pragma once
// `orchard network simulate`: the real job store and placement, with simulated nodes — how
// long registering N nodes takes, and placing M jobs among them (docs/network.md, "Scale").
// Clients submit jobs in batches of 64 with varied prompt and reply lengths; the scheduler
// places each queued batch in one transaction, as the coordinator does; jobs run until half
// the network's job slots are busy, then the oldest finish. Only the placements are timed.
#include <cstdint>
#include <functional>
#include <string>

namespace orchard::network {

struct SimulateOptions {
  int nodes = 1000;
  int jobs = 1000;
  std::string store;  // an SQLite file (made when absent) or a postgresql:// URL
  uint64_t seed = 1;
  bool wait_for_disk = true;  // StoreOptions::wait_for_disk
  int batch = 64;             // jobs submitted between two scheduler passes (StoreOptions::assign_batch)
};

struct SimulateReport {
  int nodes = 0, jobs = 0, placed = 0, waiting = 0, failed = 0;
  double register_s = 0;        // registering every node
  double index_s = 0;           // reading them all into the placement index
  double place_s = 0;           // the placement passes alone, summed
  double placements_per_s = 0;  // placed / place_s
  // The CPU time of those passes (this process's, so the database's work when it is SQLite):
  // a comparison less at the mercy of other programs on a shared machine than the wall clock.
  double place_cpu_s = 0;
  double placements_per_cpu_s = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;  // per placed job: its pass's time, from start to commit
  double peak_rss_mib = 0;      // this process's, at the end
};

// `progress` gets a line now and then. Throws orchard::Error when the store cannot be opened.
SimulateReport simulate(const SimulateOptions& o, const std::function<void(const std::string&)>& progress = {});

}  // namespace orchard::network
