#include "cli/cluster_rank.h"

#include <signal.h>

#include <cstdio>

#include "dist/config.h"
#include "tensor/error.h"

namespace orchard::cli {

bool runs_as_rank(const std::string& parallel, const std::string& command) {
  if (dist::Config::in_job()) return true;
  if (parallel.empty()) return false;
  throw Error("--parallel runs as the ranks of a job: start it with `orchard run --nodes N --" + command +
              " …` or `orchard launch -n N -- orchard " + command + " --parallel " + parallel + " …`");
}

parallel::SessionOptions session_options(const ClusterRankOptions& o) {
  parallel::SessionOptions so;
  so.engine.model_path = o.model_path;
  so.engine.threads = o.threads;
  so.engine.n_ctx = o.ctx;
  so.engine.mmap = o.mmap;
  so.engine.kv_type = o.kv_type;
  so.choose = o.parallel.empty() || o.parallel == "auto";
  if (!so.choose) so.kind = parallel::parse_kind(o.parallel);
  so.tp = o.tp;
  so.chunk = o.chunk;
  return so;
}

void follow_rank0(serve::ClusterExecutor& exec) {
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  exec.follow();
}

void print_plan(const parallel::Session& session) {
  if (!session.plan_note().empty()) std::fprintf(stderr, "%s", session.plan_note().c_str());
  std::fprintf(stderr, "%s", session.plan().describe().c_str());
}

StopFollowers::~StopFollowers() {
  try {
    exec_.stop();
  } catch (...) {
    // Rank 0 is ending anyway; followers whose link broke find out through the peer monitor.
  }
}

}  // namespace orchard::cli
