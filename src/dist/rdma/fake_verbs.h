#pragma once
// An in-process stand-in for an RDMA fabric: queue pairs of ranks running as
// threads of one process, connected by number; RDMA writes are memcpy into
// the target's registered region, with the same checks a NIC makes (bounds,
// keys, a posted receive for the immediate). break_links() makes every later
// write fail as a dead peer's would.
#include <memory>

#include "dist/rdma/verbs.h"

namespace orchard::dist::rdma {

std::unique_ptr<Verbs> make_fake_verbs();
// Every write posted from now on completes with an error (peer gone).
void fake_break_links();
void fake_reset();

}  // namespace orchard::dist::rdma
