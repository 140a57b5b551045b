#include "dist/tcp/tcp_group.h"

#include <algorithm>
#include <numeric>

#include "dist/make_group.h"

namespace orchard::dist {
namespace {

// Measured with `orchard bench comm --algo direct|ring` (docs/benchmarks.md).
constexpr size_t kDefaultRingBytes = 256 << 10;
// The ring's steps go unsplit up to 4 MiB: the transport already interleaves its sends and reads
// in pieces, and a second level of splitting, each piece waiting for the last, only added waits
// (2 ranks on loopback, 1-16 MiB all_sum: 256 KiB pieces 1.0-1.3x OpenMPI's time, 4 MiB 0.7-0.95x;
// 4 ranks 1 MiB and 4 MiB pieces alike).
constexpr size_t kTcpChunkBytes = 4 << 20;

int index_of(const std::vector<int>& members, int mesh_rank) {
  return static_cast<int>(std::find(members.begin(), members.end(), mesh_rank) - members.begin());
}

}  // namespace

std::unique_ptr<TcpGroup> TcpGroup::create(const Config& config) {
  auto mesh = net::Mesh::connect(config, 1);
  std::vector<int> all(static_cast<size_t>(config.size));
  std::iota(all.begin(), all.end(), 0);
  return std::make_unique<TcpGroup>(std::move(mesh), std::move(all), 0);
}

TcpGroup::TcpGroup(std::shared_ptr<net::Mesh> mesh, std::vector<int> members, uint32_t id)
    : TransportGroup(transport_, id, mesh->config().ring_bytes ? mesh->config().ring_bytes : kDefaultRingBytes,
                     kTcpChunkBytes),
      mesh_(mesh),
      members_(members),
      transport_(mesh, members, index_of(members, mesh->rank())) {}

std::unique_ptr<Group> TcpGroup::make_subgroup(const std::vector<int>& ranks, uint32_t id) {
  std::vector<int> members;
  for (int r : ranks) members.push_back(members_[static_cast<size_t>(r)]);
  return std::make_unique<TcpGroup>(mesh_, std::move(members), id);
}

std::unique_ptr<Group> make_tcp_group(const Config& config) { return TcpGroup::create(config); }

}  // namespace orchard::dist
