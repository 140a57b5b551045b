#pragma once
// A node that is a cabled group: `orchard node --parallel …` started as the ranks of a job
// (`orchard run --nodes N --node …`, `orchard launch -n N -- orchard node …`). The model is
// split across the ranks exactly as `orchard serve --parallel` splits it (parallel::Session),
// and jobs run through serve::ClusterExecutor: rank 0 is the agent and decides every step,
// the other ranks follow. Rank 0 registers ONE node whose description lists every rank's
// machine and the link between them as measured here, so placement (which never combines
// nodes) can plan the split over them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dist/group.h"
#include "protocol/node_info.h"

namespace orchard::node {

struct GroupDescription {
  std::vector<protocol::MachineInfo> machines;  // rank order
  protocol::CabledGroup group;
};

// Collective over `world`: every rank passes its own machine (node/machine.h this_machine);
// rank 0 gets every rank's, named uniquely (ranks sharing a host are "host#rank"), and the
// link: the backend's name ("shm", "tcp", …), the one-way latency of a small message (median
// of round trips from rank 0) and the payload bandwidth of a large one (the slowest peer's
// best). Other ranks get an empty description.
GroupDescription describe_group(dist::Group& world, const protocol::MachineInfo& mine);

}  // namespace orchard::node
