#pragma once
// A Group made of the generic algorithms over any point-to-point Transport
// (tcp and rdma). Small all_sums go one round to every peer; from ring_bytes
// up, a chunked ring. Derived classes own the transport and make sub-groups.
#include <memory>
#include <vector>

#include "dist/algorithms/algorithms.h"
#include "dist/group.h"
#include "dist/transport.h"

namespace orchard::dist {

class TransportGroup : public Group {
 public:
  // `t` must outlive this object (it is normally a member of the derived class).
  TransportGroup(Transport& t, uint32_t id, size_t ring_bytes, size_t chunk_bytes);

  int rank() const override { return t_.rank(); }
  int size() const override { return t_.size(); }
  void all_sum(void* buf, size_t count, DType type) override;
  void all_gather(const void* send, void* recv, size_t bytes) override;
  void all_to_all(const void* send, void* recv, size_t bytes) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void send(const void* buf, size_t bytes, int dst) override;
  void recv(void* buf, size_t bytes, int src) override;
  void barrier() override;
  std::unique_ptr<Group> split(int color, int key) override;

  // Benchmarks and tests pick the algorithm explicitly.
  enum class Algo { kAuto, kDirect, kRing };
  void all_sum_with(void* buf, size_t count, DType type, Algo algo);
  size_t ring_bytes() const { return ring_bytes_; }

 protected:
  // `ranks` are ranks of this group, in the new group's order.
  virtual std::unique_ptr<Group> make_subgroup(const std::vector<int>& ranks, uint32_t id) = 0;

 private:
  Tag next(Op op) { return Tag{op, id_, seq_++}; }
  void check_peer(int peer, const char* what) const;

  Transport& t_;
  uint32_t id_;
  uint32_t seq_ = 0, splits_ = 0;
  std::vector<uint32_t> sent_, received_;
  Scratch scratch_;
  size_t ring_bytes_;
  size_t chunk_bytes_;  // the ring's piece: its reduction of one piece overlaps the next transfer
};

}  // namespace orchard::dist
