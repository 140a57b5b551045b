// Cluster announcements arrive from anyone on the local network: any datagram must decode to an
// announcement or an error, nothing else. The input is tried raw (what a stranger sends) and as
// the JSON of a correctly signed one (what a member of another version, or a buggy one, sends),
// so the fuzzer reaches the field checks behind the MAC; what decodes goes through the member
// table and is encoded again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "dist/discovery/announcement.h"
#include "dist/discovery/membership.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orchard::dist::discovery;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (decode_announcement(bytes, "fuzz").announcement) __builtin_trap();  // nothing unsigned passes
  const DecodedAnnouncement d = decode_announcement(sign_announcement_json(bytes, "fuzz"), "fuzz");
  if (!d.announcement) return 0;
  Membership m("self", "0.1.0", 3000);
  m.observe(*d.announcement, "10.0.0.1", "10.0.0.2", 1);
  m.expire(5000);
  try {
    const DecodedAnnouncement again = decode_announcement(encode_announcement(*d.announcement, "fuzz"), "fuzz");
    if (!again.announcement || again.announcement->id != d.announcement->id) __builtin_trap();
  } catch (const orchard::Error&) {  // too large to send again: refused by name
  }
  return 0;
}
