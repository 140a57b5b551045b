#include "dist/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dist/group.h"

namespace orchard::dist::shm {
namespace {

constexpr uint64_t kSegmentMagic = 0x4D48534843524FULL;  // "ORCHSHM"
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 4096;

size_t lines_bytes(int n) { return sizeof(RankLine) * static_cast<size_t>(n); }
size_t counters_bytes(int n) { return sizeof(MailboxCounters) * static_cast<size_t>(n) * static_cast<size_t>(n); }

}  // namespace

size_t Segment::total_bytes(int n, size_t slot_bytes, size_t mailbox_bytes) {
  const size_t nn = static_cast<size_t>(n);
  return kHeaderBytes + lines_bytes(n) + counters_bytes(n) + 2 * nn * slot_bytes + nn * nn * mailbox_bytes;
}

Segment::Segment(Segment&& o) noexcept { *this = std::move(o); }

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, bytes_);
    base_ = o.base_;
    bytes_ = o.bytes_;
    ranks_ = o.ranks_;
    o.base_ = nullptr;
  }
  return *this;
}

Segment::~Segment() {
  if (base_) ::munmap(base_, bytes_);
}

Segment Segment::create(const std::string& name, int ranks, size_t slot_bytes, size_t mailbox_bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) throw CommError("shm: cannot create segment " + name + ": " + std::strerror(errno));
  const size_t bytes = total_bytes(ranks, slot_bytes, mailbox_bytes);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw CommError("shm: cannot size segment " + name + " to " + std::to_string(bytes >> 20) +
                    " MiB: " + std::strerror(err) + " (is /dev/shm full?)");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    throw CommError("shm: cannot map segment " + name + ": " + std::strerror(errno));
  }
  Segment s;
  s.base_ = static_cast<uint8_t*>(p);
  s.bytes_ = bytes;
  s.ranks_ = ranks;
  // The file is zero-filled, which is a valid initial state for every counter.
  SegmentHeader& h = s.header();
  h.ranks = static_cast<uint32_t>(ranks);
  h.version = kVersion;
  h.slot_bytes = slot_bytes;
  h.mailbox_bytes = mailbox_bytes;
  std::atomic_thread_fence(std::memory_order_release);
  h.magic = kSegmentMagic;
  return s;
}

Segment Segment::open(const std::string& name, int ranks) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0)
    throw CommError("shm: cannot open segment " + name + ": " + std::strerror(errno) +
                    " (the shm backend needs every rank on one host)");
  struct stat st {};
  ::fstat(fd, &st);
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < kHeaderBytes) {
    ::close(fd);
    throw CommError("shm: segment " + name + " is truncated");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw CommError("shm: cannot map segment " + name + ": " + std::strerror(errno));
  Segment s;
  s.base_ = static_cast<uint8_t*>(p);
  s.bytes_ = bytes;
  s.ranks_ = ranks;
  const SegmentHeader& h = s.header();
  if (h.magic != kSegmentMagic || h.version != kVersion || h.ranks != static_cast<uint32_t>(ranks) ||
      total_bytes(ranks, h.slot_bytes, h.mailbox_bytes) != bytes)
    throw CommError("shm: segment " + name + " has another layout (different orchard versions?)");
  return s;
}

void Segment::unlink(const std::string& name) { ::shm_unlink(name.c_str()); }

RankLine& Segment::line(int r) const {
  return *reinterpret_cast<RankLine*>(base_ + kHeaderBytes + sizeof(RankLine) * static_cast<size_t>(r));
}

MailboxCounters& Segment::counters(int from, int to) const {
  auto* first = reinterpret_cast<MailboxCounters*>(base_ + kHeaderBytes + lines_bytes(ranks_));
  return first[static_cast<size_t>(from) * static_cast<size_t>(ranks_) + static_cast<size_t>(to)];
}

uint8_t* Segment::slot(int r, int set) const {
  return base_ + kHeaderBytes + lines_bytes(ranks_) + counters_bytes(ranks_) +
         (2 * static_cast<size_t>(r) + static_cast<size_t>(set)) * slot_bytes();
}

uint8_t* Segment::ring(int from, int to) const {
  const size_t nn = static_cast<size_t>(ranks_);
  return base_ + kHeaderBytes + lines_bytes(ranks_) + counters_bytes(ranks_) + 2 * nn * slot_bytes() +
         (static_cast<size_t>(from) * nn + static_cast<size_t>(to)) * mailbox_bytes();
}

}  // namespace orchard::dist::shm
