#pragma once
// The shared-memory segment of one shm group and its layout:
//   header | one cache line per rank (arrival counter) | mailbox counters
//   | two collective slots per rank | one mailbox ring per ordered pair.
// Rank 0 creates it under a fresh random name; everyone maps it; rank 0
// unlinks the name once all have it mapped, so a crash leaks nothing.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace orchard::dist::shm {

struct alignas(64) RankLine {
  std::atomic<uint64_t> arrive;  // sync points this rank has reached
  std::atomic<uint64_t> doing;   // the call it is in (0: none), to diagnose mismatches
  uint64_t desc[2][2];           // per sync parity: {op<<32|seq, bytes}, checked by all
};

struct alignas(64) MailboxCounters {
  std::atomic<uint64_t> written;  // bytes the sender has put in the ring
  char pad[56];
  std::atomic<uint64_t> read;  // bytes the receiver has taken out
};

struct SegmentHeader {
  uint64_t magic;
  uint32_t ranks;
  uint32_t version;
  uint64_t slot_bytes;
  uint64_t mailbox_bytes;
  alignas(64) std::atomic<uint32_t> epoch;  // futex word: bumped to wake sleepers
  std::atomic<uint32_t> sleepers;
};

class Segment {
 public:
  static Segment create(const std::string& name, int ranks, size_t slot_bytes, size_t mailbox_bytes);
  static Segment open(const std::string& name, int ranks);
  Segment() = default;
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  ~Segment();
  static void unlink(const std::string& name);

  SegmentHeader& header() const { return *reinterpret_cast<SegmentHeader*>(base_); }
  RankLine& line(int r) const;
  MailboxCounters& counters(int from, int to) const;
  uint8_t* slot(int r, int set) const;
  uint8_t* ring(int from, int to) const;
  size_t slot_bytes() const { return header().slot_bytes; }
  size_t mailbox_bytes() const { return header().mailbox_bytes; }

 private:
  static size_t total_bytes(int ranks, size_t slot_bytes, size_t mailbox_bytes);
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  int ranks_ = 0;
};

}  // namespace orchard::dist::shm
