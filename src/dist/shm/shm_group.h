#pragma once
// The shm backend: ranks on one host exchange through one shared segment.
// Collectives: each rank copies its part into its slot, announces arrival by
// bumping a counter, and reads the others' slots; two slot sets alternate so
// one arrival per round suffices. send/recv stream through a ring per
// ordered pair. Waits spin first (no syscall on the hot path) and only then
// sleep on a futex. Start-up, split and failure detection go over a small
// tcp group, whose heartbeats catch a rank that dies while others wait.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/group.h"
#include "dist/shm/shm_segment.h"
#include "dist/tcp/tcp_group.h"

namespace orchard::dist {

class ShmGroup : public Group {
 public:
  static std::unique_ptr<ShmGroup> create(const Config& config);
  explicit ShmGroup(std::unique_ptr<TcpGroup> boot);

  int rank() const override { return me_; }
  int size() const override { return n_; }
  const char* backend() const override { return "shm"; }
  void all_sum(void* buf, size_t count, DType type) override;
  void all_gather(const void* send, void* recv, size_t bytes) override;
  void all_to_all(const void* send, void* recv, size_t bytes) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void send(const void* buf, size_t bytes, int dst) override;
  void recv(void* buf, size_t bytes, int src) override;
  void barrier() override;
  std::unique_ptr<Group> split(int color, int key) override;

 private:
  // Announce arrival at the next sync point with a description of the call,
  // wait for every rank, and check they all made the same call.
  void sync(Op op, uint32_t seq, uint64_t bytes);
  // Waits until ready(); blocker() names the rank being waited on.
  template <class Ready, class Blocker>
  void wait_until(Ready ready, Blocker blocker);
  void wake();
  void enter(Op op, int peer, uint32_t seq, bool receiving = false);
  void leave();
  [[noreturn]] void mismatch(int peer, uint64_t theirs);
  std::string describe(uint64_t doing) const;
  int set_for_round() { return static_cast<int>(rounds_++ & 1); }

  std::unique_ptr<TcpGroup> boot_;
  shm::Segment seg_;
  int me_, n_;
  uint64_t syncs_ = 0, rounds_ = 0;
  uint32_t seq_ = 0;
  std::vector<uint32_t> sent_, received_;
  std::vector<const void*> srcs_;
  uint64_t doing_ = 0;
  std::chrono::microseconds spin_{0};
  bool oversubscribed_ = false;
};

}  // namespace orchard::dist
