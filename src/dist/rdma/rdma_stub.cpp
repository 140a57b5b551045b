// Built when libibverbs was not found.
#include "dist/make_group.h"

namespace orchard::dist {

bool rdma_available() { return false; }

std::unique_ptr<Group> make_rdma_group(const Config&) {
  throw CommError("this orchard was built without RDMA: install libibverbs-dev and rebuild");
}

}  // namespace orchard::dist
