#pragma once
// Point-to-point over RDMA. Each ordered pair of ranks has one reliable-
// connected queue pair and a registered ring in the receiver's memory; the
// sender treats its messages (header + payload) as a byte stream, copies a
// piece into its registered staging ring and RDMA-writes it to the same
// offset of the receiver's ring with the piece's length as the immediate.
// The receiver copies out and returns credits (a zero-length write whose
// immediate has the top bit set), so the sender never overruns the ring.
#include <memory>
#include <vector>

#include "dist/net/mesh.h"
#include "dist/rdma/verbs.h"
#include "dist/transport.h"

namespace orchard::dist {
class TcpGroup;
}

namespace orchard::dist::rdma {

// The queue pairs and rings of one rank, shared by a group and its splits.
struct Links {
  static constexpr size_t kRingBytes = 1 << 20;
  static constexpr int kDepth = 64;  // outstanding writes and posted receives per queue pair

  struct Peer {
    std::unique_ptr<QueuePair> qp;
    std::vector<uint8_t> ring, stage;  // receive ring (peer writes here), send staging
    Region ring_mr{}, stage_mr{};
    uint64_t remote_addr = 0;
    uint32_t remote_rkey = 0;
    uint64_t sent = 0, peer_consumed = 0;   // our stream into the peer's ring
    uint64_t arrived = 0, consumed = 0, credited = 0;  // the peer's stream into ours
    int in_flight = 0;
  };

  // Collective over the bootstrap group: creates, exchanges and connects.
  Links(std::unique_ptr<Verbs> verbs, TcpGroup& boot);
  ~Links();
  std::unique_ptr<Verbs> verbs;
  std::vector<Peer> peers;  // by mesh rank; empty slot for this rank
  int rank = 0;
};

class RdmaTransport : public Transport {
 public:
  RdmaTransport(std::shared_ptr<Links> links, net::Mesh& mesh, std::vector<int> members, int my_index);
  int rank() const override { return me_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string peer_name(int peer) const override { return mesh_.name(members_[peer]); }
  void post_send(int peer, const void* buf, size_t bytes, const Tag& tag) override;
  void post_recv(int peer, void* buf, size_t bytes, const Tag& tag) override;
  void wait() override;

 private:
  struct Pending {
    uint8_t* buf;
    size_t bytes, done;
    MsgHeader header;
    Tag tag;
  };
  struct Queue {
    std::vector<Pending> items;
    size_t head = 0;
    bool busy() const { return head < items.size(); }
  };
  bool poll_completions(int peer);
  bool progress_send(int peer);
  bool progress_recv(int peer);
  [[noreturn]] void fail(int peer, const std::string& why) const;

  std::shared_ptr<Links> links_;
  net::Mesh& mesh_;
  std::vector<int> members_;
  int me_;
  std::vector<Queue> sends_, recvs_;
  Tag current_{Op::kSend, 0, 0};
};

}  // namespace orchard::dist::rdma
