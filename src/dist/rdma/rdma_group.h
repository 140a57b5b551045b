#pragma once
// The rdma backend: generic algorithms over RdmaTransport. A small tcp group
// does the rest: it exchanges queue-pair endpoints at start, forms
// sub-groups, and carries the heartbeats that detect a dead peer.
#include <memory>
#include <vector>

#include "dist/config.h"
#include "dist/rdma/rdma_transport.h"
#include "dist/tcp/tcp_group.h"
#include "dist/transport_group.h"

namespace orchard::dist {

class RdmaGroup : public TransportGroup {
 public:
  // Collective: every rank of `boot` calls it with its own verbs.
  RdmaGroup(std::shared_ptr<TcpGroup> boot, std::unique_ptr<rdma::Verbs> verbs);
  RdmaGroup(std::shared_ptr<TcpGroup> boot, std::shared_ptr<rdma::Links> links, std::vector<int> members,
            uint32_t id);
  const char* backend() const override { return "rdma"; }
  const std::string& device() const { return device_; }

 protected:
  std::unique_ptr<Group> make_subgroup(const std::vector<int>& ranks, uint32_t id) override;

 private:
  std::shared_ptr<TcpGroup> boot_;
  std::shared_ptr<rdma::Links> links_;
  std::vector<int> members_;  // mesh ranks
  std::string device_;
  rdma::RdmaTransport transport_;
};

}  // namespace orchard::dist
