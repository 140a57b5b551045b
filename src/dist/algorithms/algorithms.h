#pragma once
// Collective algorithms over any Transport, each small enough to check by eye
// (after Gloo: one algorithm, one file). All of them leave identical bits on
// every rank.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dist/group.h"
#include "dist/transport.h"

namespace orchard::dist {

// Reusable scratch owned by a group: grows to the largest request and is
// then reused, so steady-state calls do not allocate.
class Scratch {
 public:
  void* get(size_t bytes) {
    if (buf_.size() < bytes) buf_.resize(bytes);
    return buf_.data();
  }

 private:
  std::vector<uint8_t> buf_;
};

// One round: every rank sends its whole buffer to every other and sums all
// n buffers in rank order. Latency-optimal; moves (n-1)x the data.
void all_sum_direct(Transport& t, void* buf, size_t count, DType type, const Tag& tag, Scratch& scratch);

// Ring reduce-scatter then ring all-gather, each step cut into chunks of
// `chunk_bytes` so sending, receiving and adding overlap. Moves 2(n-1)/n of
// the data per rank: bandwidth-optimal for large buffers.
void all_sum_ring(Transport& t, void* buf, size_t count, DType type, const Tag& tag, Scratch& scratch,
                  size_t chunk_bytes);

// Every rank sends its block to every other: one round.
void all_gather_direct(Transport& t, const void* send, void* recv, size_t bytes, const Tag& tag);
// n-1 ring steps, each moving one block: bandwidth-optimal.
void all_gather_ring(Transport& t, const void* send, void* recv, size_t bytes, const Tag& tag);

// Block r of send to rank r, block r of recv from rank r: every pair exchanges its two blocks
// at once, all pairs posted together (full duplex; one round).
void all_to_all_direct(Transport& t, const void* send, void* recv, size_t bytes, const Tag& tag);

// Root sends to each rank directly (small), or a pipelined chain passes
// chunks along rank order starting at the root (large).
void broadcast_direct(Transport& t, void* buf, size_t bytes, int root, const Tag& tag);
void broadcast_chain(Transport& t, void* buf, size_t bytes, int root, const Tag& tag, size_t chunk_bytes);

// Everyone tells everyone it arrived.
void barrier_direct(Transport& t, const Tag& tag);

}  // namespace orchard::dist
