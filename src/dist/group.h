#pragma once
// The one interface every communication backend implements (after MLX's
// mlx/distributed): a fixed set of ranks that exchange caller-owned buffers.
//
// Every call is blocking and collective calls must be made by every rank of
// the group in the same order with the same sizes; a backend that notices a
// mismatch (or a dead peer) throws orchard::dist::CommError instead of hanging.
// No call allocates: buffers belong to the caller, scratch space to the group.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tensor/error.h"

namespace orchard::dist {

enum class DType : uint8_t { F32 = 0, F16 = 1, BF16 = 2 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);

// Thrown for every communication failure: a peer that died or stopped
// answering, a protocol or collective mismatch, an authentication failure.
class CommError : public orchard::Error {
 public:
  using orchard::Error::Error;
};

class Group {
 public:
  virtual ~Group() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Short backend name ("tcp", "shm", "mpi", "rdma") for logs and benchmarks.
  virtual const char* backend() const = 0;

  // In place: buf[i] = sum over ranks of buf[i]. Every rank ends with the
  // same bits (sums are taken in rank order, or by one owner per element).
  virtual void all_sum(void* buf, size_t count, DType type) = 0;
  // recv holds size() * bytes: rank r's `send` lands at recv + r * bytes.
  virtual void all_gather(const void* send, void* recv, size_t bytes) = 0;
  // send and recv hold size() blocks of `bytes`: block r of send goes to rank r, and block r of
  // recv is what rank r sent this rank (expert parallel: tokens to the ranks holding their
  // experts). send and recv must not overlap.
  virtual void all_to_all(const void* send, void* recv, size_t bytes) = 0;
  virtual void broadcast(void* buf, size_t bytes, int root) = 0;
  virtual void send(const void* buf, size_t bytes, int dst) = 0;
  virtual void recv(void* buf, size_t bytes, int src) = 0;
  virtual void barrier() = 0;
  // Collective: ranks passing the same color form a new group, ordered by
  // key (ties by parent rank). Returns nullptr for color < 0.
  virtual std::unique_ptr<Group> split(int color, int key) = 0;

  // Convenience wrappers for the common f32 case.
  void all_sum(float* buf, size_t count) { all_sum(buf, count, DType::F32); }
};

}  // namespace orchard::dist
