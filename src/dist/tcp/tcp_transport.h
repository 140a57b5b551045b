#pragma once
// Point-to-point transfers over the mesh's data sockets. Non-blocking sockets
// and one progress loop: every posted send and receive moves at once, so two
// ranks sending each other 64 MB never deadlock on full socket buffers. The
// loop spins briefly (small messages arrive in microseconds) before sleeping
// in poll(), and checks the peer monitor whenever it waits.
#include <poll.h>

#include <memory>
#include <vector>

#include "dist/net/mesh.h"
#include "dist/transport.h"

namespace orchard::dist {

class TcpTransport : public Transport {
 public:
  // members[i] is the mesh rank of group rank i.
  TcpTransport(std::shared_ptr<net::Mesh> mesh, std::vector<int> members, int my_index);

  int rank() const override { return me_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string peer_name(int peer) const override { return mesh_->name(members_[peer]); }
  void post_send(int peer, const void* buf, size_t bytes, const Tag& tag) override;
  void post_recv(int peer, void* buf, size_t bytes, const Tag& tag) override;
  void wait() override;

 private:
  struct Pending {
    uint8_t* buf;
    size_t bytes;
    size_t done;  // bytes moved, header included
    MsgHeader header;
    Tag tag;
    net::Clock::time_point release;  // link emulation: not before this
    bool timed;
  };
  struct Queue {
    std::vector<Pending> items;
    size_t head = 0;
    bool busy() const { return head < items.size(); }
  };
  bool progress_sends(int peer);
  bool progress_recvs(int peer);
  [[noreturn]] void fail(int peer, const std::string& why) const;
  std::string during() const;

  std::shared_ptr<net::Mesh> mesh_;
  std::vector<int> members_;
  int me_;
  std::vector<Queue> sends_, recvs_;
  std::vector<net::Clock::time_point> link_free_;
  std::vector<struct pollfd> pollfds_;
  double latency_s_, bytes_per_s_;
  std::chrono::microseconds spin_{0};
  Tag current_{Op::kSend, 0, 0};
};

}  // namespace orchard::dist
