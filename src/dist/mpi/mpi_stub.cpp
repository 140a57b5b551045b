// Built when MPI was not found: the mpi backend explains how to get it.
#include "dist/make_group.h"

namespace orchard::dist {

bool mpi_available() { return false; }

std::unique_ptr<Group> make_mpi_group(const Config&) {
  throw CommError("this orchard was built without MPI: install libopenmpi-dev and rebuild");
}

}  // namespace orchard::dist
