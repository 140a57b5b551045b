#pragma once
// The tcp backend: a full mesh of persistent TCP_NODELAY connections. Small
// all_sums go one round to every peer; from ring_bytes up, a chunked ring.
#include <memory>
#include <vector>

#include "dist/algorithms/algorithms.h"
#include "dist/config.h"
#include "dist/group.h"
#include "dist/net/mesh.h"
#include "dist/tcp/tcp_transport.h"

namespace orchard::dist {

class TcpGroup : public Group {
 public:
  static std::unique_ptr<TcpGroup> create(const Config& config);
  TcpGroup(std::shared_ptr<net::Mesh> mesh, std::vector<int> members, uint32_t id);

  int rank() const override { return transport_.rank(); }
  int size() const override { return transport_.size(); }
  const char* backend() const override { return "tcp"; }
  void all_sum(void* buf, size_t count, DType type) override;
  void all_gather(const void* send, void* recv, size_t bytes) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void send(const void* buf, size_t bytes, int dst) override;
  void recv(void* buf, size_t bytes, int src) override;
  void barrier() override;
  std::unique_ptr<Group> split(int color, int key) override;

  // Benchmarks and tests pick the algorithm explicitly.
  enum class Algo { kAuto, kDirect, kRing };
  void all_sum_with(void* buf, size_t count, DType type, Algo algo);
  size_t ring_bytes() const { return ring_bytes_; }
  // For backends that bootstrap over tcp (shm): the mesh and, per group
  // rank, its mesh rank.
  net::Mesh& mesh() const { return *mesh_; }
  const std::vector<int>& members() const { return members_; }

 private:
  Tag next(Op op) { return Tag{op, id_, seq_++}; }
  void check_peer(int peer, const char* what) const;

  std::shared_ptr<net::Mesh> mesh_;
  std::vector<int> members_;
  uint32_t id_;
  uint32_t seq_ = 0;
  uint32_t splits_ = 0;
  std::vector<uint32_t> sent_, received_;
  TcpTransport transport_;
  Scratch scratch_;
  size_t ring_bytes_;
  size_t chunk_bytes_ = 1 << 20;
};

}  // namespace orchard::dist
