#pragma once
// Serving from a model split across ranks. Rank 0 runs the HTTP server and the scheduler; every
// step it decides, it first broadcasts (which slots, which tokens), then all ranks run that step
// through their shards together. So there is one global order of work: ranks never see
// requests in different orders, which is how peers of a split model deadlock. The sampling
// rank sends each step's logits to rank 0, which samples.
#include <memory>
#include <vector>

#include "parallel/session.h"
#include "serve/executor.h"
#include "serve/service.h"

namespace orchard::serve {

class ClusterExecutor : public Executor {
 public:
  // Collective: every rank constructs it with the same slot count.
  // `chunk`: steps with at most this many tokens run as one batched pass; longer ones slot by
  // slot in pipelined chunks.
  ClusterExecutor(parallel::Session& session, dist::Group& world, int slots, int64_t chunk = 64);
  int slots() const override { return static_cast<int>(caches_.size()); }
  int64_t slot_capacity() const override { return session_.engine().n_ctx(); }
  int64_t n_vocab() const override { return session_.engine().hparams().n_vocab; }
  // Rank 0 only.
  void step(std::span<const SlotFeed> feeds, std::vector<float>& logits) override;
  // Ranks other than 0: follow rank 0's steps until it stops.
  void follow();
  // Rank 0: tells the others to return from follow().
  void stop();

  // Collective: every rank's host, share of the model and memory, and the round-trip latency
  // from rank 0 measured now (for the web page's cluster panel; complete on rank 0).
  ClusterView describe(const std::string& model_path);

 private:
  void run(std::span<const SlotFeed> feeds, std::vector<float>& logits);

  parallel::Session& session_;
  dist::Group& world_;
  std::vector<std::unique_ptr<KVCache>> caches_;
  std::vector<std::unique_ptr<parallel::DistributedForward>> forwards_;
  std::vector<float> row_;
  int64_t chunk_;
  bool stopped_ = false;
};

}  // namespace orchard::serve
