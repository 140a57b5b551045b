#pragma once
// The few verbs the rdma backend uses, behind an interface: IbVerbs maps them
// onto libibverbs (reliable-connected queue pairs, registered memory, RDMA
// write with immediate); FakeVerbs runs them in-process so the backend's
// logic is tested where no RDMA device exists.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace orchard::dist::rdma {

// What a peer needs to reach one of our queue pairs and write into one of
// our registered buffers. Exchanged over the bootstrap tcp group.
struct Endpoint {
  uint32_t qpn;
  uint32_t psn;
  uint16_t lid;
  uint8_t gid[16];
  uint64_t addr;  // registered receive ring
  uint32_t rkey;
  uint32_t pad;
};

struct Region {
  void* addr;
  size_t bytes;
  uint32_t lkey;
  uint32_t rkey;
  void* handle;  // backend-specific (ibv_mr*)
};

struct Completion {
  bool is_recv;     // an incoming write-with-immediate
  uint32_t imm;     // its immediate value
  uint64_t wr_id;   // for sends: what was posted
  bool ok;
  std::string error;
};

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual Endpoint local() const = 0;  // addr/rkey left for the caller
  virtual void connect(const Endpoint& remote) = 0;  // INIT -> RTR -> RTS
  // RDMA write of [local, local+bytes) to remote_addr, raising a completion
  // with `imm` at the peer (which must have posted a receive).
  virtual void write_imm(const Region& mr, const void* local, size_t bytes, uint64_t remote_addr, uint32_t rkey,
                         uint32_t imm, uint64_t wr_id) = 0;
  virtual void post_recv(uint64_t wr_id) = 0;
  // Non-blocking; returns how many completions were written to out.
  virtual int poll(Completion* out, int max) = 0;
};

class Verbs {
 public:
  virtual ~Verbs() = default;
  virtual std::string device() const = 0;
  virtual Region register_memory(void* addr, size_t bytes) = 0;
  virtual void deregister(Region& r) = 0;
  virtual std::unique_ptr<QueuePair> create_qp(int max_outstanding) = 0;
};

// Opens the named device (first one when empty); throws CommError when
// libibverbs or the device is missing.
std::unique_ptr<Verbs> open_ib_verbs(const std::string& device);
// The RDMA devices libibverbs sees (`ibv_devices`); empty without any, or in a build without it.
std::vector<std::string> ib_device_names();

}  // namespace orchard::dist::rdma
