#include "dist/transport.h"

#include "dist/group.h"

namespace orchard::dist {

const char* op_name(Op op) {
  switch (op) {
    case Op::kSend: return "send/recv";
    case Op::kAllSum: return "all_sum";
    case Op::kAllGather: return "all_gather";
    case Op::kBroadcast: return "broadcast";
    case Op::kBarrier: return "barrier";
    case Op::kSplit: return "split";
    case Op::kAllToAll: return "all_to_all";
  }
  return "unknown operation";
}

MsgHeader make_header(const Tag& tag, size_t bytes) {
  MsgHeader h{};
  h.magic = kMsgMagic;
  h.op = static_cast<uint8_t>(tag.op);
  h.group = tag.group;
  h.seq = tag.seq;
  h.bytes = bytes;
  return h;
}

void check_header(const MsgHeader& got, const Tag& want, size_t want_bytes, const std::string& peer) {
  if (got.magic != kMsgMagic) throw CommError("rank " + peer + " sent a corrupt message header");
  if (got.op == static_cast<uint8_t>(want.op) && got.group == want.group && got.seq == want.seq &&
      got.bytes == want_bytes)
    return;
  auto describe = [](uint8_t op, uint32_t group, uint32_t seq, uint64_t bytes) {
    return std::string(op_name(static_cast<Op>(op))) + " #" + std::to_string(seq) + " of group " +
           std::to_string(group) + " (" + std::to_string(bytes) + " bytes)";
  };
  throw CommError("collective mismatch: rank " + peer + " sent " + describe(got.op, got.group, got.seq, got.bytes) +
                  " while this rank expected " +
                  describe(static_cast<uint8_t>(want.op), want.group, want.seq, want_bytes) +
                  ": every rank must call the same collectives in the same order with the same sizes");
}

}  // namespace orchard::dist
