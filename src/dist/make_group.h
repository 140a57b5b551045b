#pragma once
// Picks a backend by name ("tcp", "shm", "mpi", "rdma"). Backends compiled
// out have a stub that throws a CommError saying how to build them.
#include <memory>
#include <string>
#include <vector>

#include "dist/config.h"
#include "dist/group.h"

namespace orchard::dist {

std::unique_ptr<Group> make_group(const Config& config);
// Joins the job described by the ORCHARD_* environment (a group of one when
// there is none).
std::unique_ptr<Group> make_group_from_env();
// Backends this build can create.
std::vector<std::string> available_backends();

// One per backend folder; stubs live beside the real ones.
std::unique_ptr<Group> make_tcp_group(const Config& config);
std::unique_ptr<Group> make_shm_group(const Config& config);
std::unique_ptr<Group> make_mpi_group(const Config& config);
std::unique_ptr<Group> make_rdma_group(const Config& config);
bool mpi_available();
bool rdma_available();

}  // namespace orchard::dist
