#pragma once
// The tcp backend: a full mesh of persistent TCP_NODELAY connections (see
// net/mesh.h) under the generic algorithms.
#include <memory>
#include <vector>

#include "dist/config.h"
#include "dist/net/mesh.h"
#include "dist/tcp/tcp_transport.h"
#include "dist/transport_group.h"

namespace orchard::dist {

class TcpGroup : public TransportGroup {
 public:
  static std::unique_ptr<TcpGroup> create(const Config& config);
  TcpGroup(std::shared_ptr<net::Mesh> mesh, std::vector<int> members, uint32_t id);
  const char* backend() const override { return "tcp"; }

  // For backends that bootstrap over tcp (shm, rdma): the mesh and, per
  // group rank, its mesh rank.
  net::Mesh& mesh() const { return *mesh_; }
  const std::vector<int>& members() const { return members_; }

 protected:
  std::unique_ptr<Group> make_subgroup(const std::vector<int>& ranks, uint32_t id) override;

 private:
  std::shared_ptr<net::Mesh> mesh_;
  std::vector<int> members_;
  TcpTransport transport_;
};

}  // namespace orchard::dist
