#pragma once
// Point-to-point layer under the generic collective algorithms (tcp and rdma
// implement it). Every message carries a small header naming the operation,
// its sequence number and its size, so ranks that call collectives in a
// different order, or with different sizes, get an error instead of a hang.
#include <cstddef>
#include <cstdint>
#include <string>

namespace orchard::dist {

enum class Op : uint8_t { kSend = 1, kAllSum, kAllGather, kBroadcast, kBarrier, kSplit, kAllToAll };
const char* op_name(Op op);

struct Tag {
  Op op;
  uint32_t group;  // which (sub)group the message belongs to
  uint32_t seq;    // per-group collective count, or per-peer send count
};

struct MsgHeader {
  uint16_t magic;
  uint8_t op;
  uint8_t pad;
  uint32_t group;
  uint32_t seq;
  uint32_t pad2;
  uint64_t bytes;
};
static_assert(sizeof(MsgHeader) == 24);
constexpr uint16_t kMsgMagic = 0x4F52;

// Throws CommError describing how `got` differs from what this rank expected.
void check_header(const MsgHeader& got, const Tag& want, size_t want_bytes, const std::string& peer);
MsgHeader make_header(const Tag& tag, size_t bytes);

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string peer_name(int peer) const = 0;
  // Queue transfers; they all progress together (full duplex) inside wait().
  // Per peer, sends complete in posting order and so do receives.
  virtual void post_send(int peer, const void* buf, size_t bytes, const Tag& tag) = 0;
  virtual void post_recv(int peer, void* buf, size_t bytes, const Tag& tag) = 0;
  virtual void wait() = 0;
};

}  // namespace orchard::dist
