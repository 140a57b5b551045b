#pragma once
// What the commands that run as the ranks of a job and serve from rank 0 share (`orchard serve
// --parallel`, `orchard node --parallel`): the session every rank loads, the followers' loop,
// and the stop message rank 0 sends however it ends.
#include <cstdint>
#include <string>

#include "parallel/session.h"
#include "serve/cluster_executor.h"

namespace orchard::cli {

struct ClusterRankOptions {
  std::string model_path;
  std::string parallel;  // auto (or empty), pipeline, tensor or hybrid
  int threads = 0, tp = 0;
  int64_t ctx = 0, chunk = 64;
  bool mmap = false;
  KVType kv_type = KVType::F32;
};

// True when the command runs as a rank of a job: inside one (`orchard run`, `orchard launch`),
// or asked to with --parallel, which outside a job is an error saying how to start it.
// `command`: "serve", "node" (how `orchard run` spells it: --serve, --node).
bool runs_as_rank(const std::string& parallel, const std::string& command);

parallel::SessionOptions session_options(const ClusterRankOptions& o);

// Ranks other than 0: runs rank 0's steps until its stop message. Rank 0 ends the job (that
// message, or its failure seen by the peer monitor), so a Ctrl-C the launcher passes to every
// rank is ignored here: it must not kill a follower mid-step.
void follow_rank0(serve::ClusterExecutor& exec);

// Rank 0: the plan on stderr, with the planner's reason when it chose.
void print_plan(const parallel::Session& session);

// Rank 0: tells the other ranks to stop following when it goes out of scope.
class StopFollowers {
 public:
  explicit StopFollowers(serve::ClusterExecutor& exec) : exec_(exec) {}
  ~StopFollowers();
  StopFollowers(const StopFollowers&) = delete;
  StopFollowers& operator=(const StopFollowers&) = delete;

 private:
  serve::ClusterExecutor& exec_;
};

}  // namespace orchard::cli
