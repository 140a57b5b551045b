#include "dist/rdma/rdma_group.h"

#include <algorithm>
#include <numeric>

#include "dist/make_group.h"

namespace orchard::dist {
namespace {

// RDMA's per-message cost is a few microseconds, so the ring pays off sooner
// than on tcp; kept equal until measured on hardware.
constexpr size_t kRingBytes = 256 << 10;
constexpr size_t kRdmaChunkBytes = 256 << 10;

std::vector<int> everyone(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

RdmaGroup::RdmaGroup(std::shared_ptr<TcpGroup> boot, std::unique_ptr<rdma::Verbs> verbs)
    : RdmaGroup(boot, std::make_shared<rdma::Links>(std::move(verbs), *boot), everyone(boot->size()), 0) {}

RdmaGroup::RdmaGroup(std::shared_ptr<TcpGroup> boot, std::shared_ptr<rdma::Links> links, std::vector<int> members,
                     uint32_t id)
    : TransportGroup(transport_, id, kRingBytes, kRdmaChunkBytes),
      boot_(boot),
      links_(links),
      members_(members),
      device_(links->verbs->device()),
      transport_(links, boot->mesh(), members,
                 static_cast<int>(std::find(members.begin(), members.end(), boot->mesh().rank()) - members.begin())) {}

std::unique_ptr<Group> RdmaGroup::make_subgroup(const std::vector<int>& ranks, uint32_t id) {
  std::vector<int> members;
  for (int r : ranks) members.push_back(members_[static_cast<size_t>(r)]);
  return std::make_unique<RdmaGroup>(boot_, links_, std::move(members), id);
}

std::unique_ptr<Group> make_rdma_group(const Config& config) {
  auto verbs = rdma::open_ib_verbs(std::getenv("ORCHARD_RDMA_DEVICE") ? std::getenv("ORCHARD_RDMA_DEVICE") : "");
  std::shared_ptr<TcpGroup> boot = TcpGroup::create(config);
  return std::make_unique<RdmaGroup>(boot, std::move(verbs));
}

}  // namespace orchard::dist
