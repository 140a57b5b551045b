#pragma once
// The cluster `orchard cluster up` found, as the planner sees it: the members (machines known
// by what they announced) and, for each pair, the fastest of the links measured between them.
// The planner's cluster has one link for every pair; a split waits on its slowest pair every
// step, so that link is the slowest of the chosen paths among the machines a plan uses.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/cluster.h"
#include "parallel/predict.h"

namespace orchard::parallel {

struct DiscoveredMachine {
  std::string id, name;
  uint64_t memory_bytes = 0;
  int cores = 0;
  // What `orchard plan --calibrate` measured on it, when it was calibrated; else the planner
  // assumes rough CPU rates for its cores (auto_plan.h's rough_machine).
  std::optional<MachineSpec> calibrated = std::nullopt;
};

// One measured way from machine `from` to machine `to`: over `to`'s `address`, from `from`'s
// own address `local` on the same link.
struct MeasuredPath {
  std::string from, to, address;
  double rtt_us = 0, mbit_s = 0;
  std::string local = {};
  // Where machine `who` (one of the two ends) reaches the other over this path.
  const std::string& address_of_other(const std::string& who) const { return who == from ? address : local; }
};

// The time a path takes to move one step's worth of a split's traffic: half a round trip plus
// 256 KiB at its bandwidth (most steps move far less, a prompt chunk more); the smaller wins.
double path_cost_us(const MeasuredPath& p);

// Per unordered pair of machines, the cheapest path either of them measured (both directions
// are one cable); pairs with no measurement are missing. Ordered by (from, to).
std::vector<MeasuredPath> choose_paths(const std::vector<MeasuredPath>& measured);

struct DiscoveredPlan {
  std::vector<std::string> machines;  // ids, in rank order: the leader first
  Prediction prediction;
  MeasuredPath bottleneck;  // the link the planner was given (empty for one machine)
  std::string why;          // one line for logs and status
};

// The planner's choice over `machines` (the leader first) and the chosen paths. A machine
// without a measured path to each earlier one is left out of multi-machine plans (it can still
// be chosen alone if it is the leader). `kind`: only splits of that kind over every machine
// reachable (`orchard cluster up --parallel pipeline`). Throws orchard::Error when no plan fits.
DiscoveredPlan plan_discovered(const ModelCost& model, const std::vector<DiscoveredMachine>& machines,
                               const std::vector<MeasuredPath>& chosen, const PredictOptions& options,
                               std::optional<Kind> kind = std::nullopt);

}  // namespace orchard::parallel
