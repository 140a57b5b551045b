// Built when libibverbs was not found: the rdma backend explains how to get it.
#include "dist/group.h"
#include "dist/make_group.h"
#include "dist/rdma/verbs.h"

namespace orchard::dist {
bool rdma_available() { return false; }
}  // namespace orchard::dist

namespace orchard::dist::rdma {
std::unique_ptr<Verbs> open_ib_verbs(const std::string&) {
  throw CommError("this orchard was built without RDMA: install libibverbs-dev and rebuild");
}
std::vector<std::string> ib_device_names() { return {}; }
}  // namespace orchard::dist::rdma
