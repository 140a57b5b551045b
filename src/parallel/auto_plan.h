#pragma once
// The split a job runs when the user names none (`--parallel auto`): the planner's choice for
// the ranks of this job as they are placed, on the machine this rank runs on. Ranks that share
// a host name share a machine; the node description comes from `orchard plan --calibrate`
// ($ORCHARD_NODE_FILE, else the default node file) or, before any calibration, from rough
// defaults that still rank the splits by memory and by link cost against compute.
#include <string>
#include <vector>

#include "dist/group.h"
#include "parallel/predict.h"

namespace orchard::parallel {

struct AutoChoice {
  Kind kind = Kind::kPipeline;
  int tp = 1;
  std::string why;  // one line: the plan, its predicted figures, what it was chosen from
};

// Collective over `world`: rank 0 decides and every rank gets the same answer.
// `budgets` (bytes per rank, may be empty) cap each machine's memory.
// `threads`: per rank (0: the machine's cores shared among its ranks).
AutoChoice choose_split(dist::Group& world, const std::string& model_path, const std::vector<uint64_t>& budgets,
                        int threads, const PredictOptions& options);

// A machine before calibration: a CPU whose kernels stream ~20 GB/s and compute ~100 GFLOP/s,
// with the backends' typical loopback costs. Good enough to order the splits.
MachineSpec rough_machine(int cores, double memory_gib);

// Where `orchard plan --calibrate` writes and the runtime reads this machine's description.
std::string default_node_file();

}  // namespace orchard::parallel
