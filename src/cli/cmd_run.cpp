// `orchard run`: a local cluster in one command. Starts N ranks of `orchard generate
// --parallel …` (or `orchard serve`, or `orchard node`) on this machine (as `orchard launch -n N` would) with every other option
// passed through.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "cli/args.h"
#include "cli/commands.h"
#include "dist/launcher.h"
#include "model/synthetic/synthetic.h"
#include "tensor/error.h"

namespace orchard::cli {

void register_run(CLI::App& app) {
  struct Opts {
    int nodes = 2;
    std::string parallel = "auto", backend = "shm";
    double latency_us = 0, gbps = 0;
    bool serve = false, node = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "Run one model split over N local ranks (a local cluster)");
  cmd->add_option("--nodes", o->nodes, "Number of ranks")->capture_default_str();
  cmd->add_option("--parallel", o->parallel, "auto (the planner picks), pipeline, tensor, hybrid or expert")->capture_default_str();
  cmd->add_option("--backend", o->backend, "tcp or shm between the ranks")->capture_default_str();
  cmd->add_option("--link-latency-us", o->latency_us, "tcp: emulated per-message latency");
  cmd->add_option("--link-gbps", o->gbps, "tcp: emulated link bandwidth");
  cmd->add_flag("--serve", o->serve, "Run `orchard serve` on the ranks instead of `orchard generate` (rank 0 listens)");
  cmd->add_flag("--node", o->node,
                "Run `orchard node` on the ranks: lend them to a network as one cabled group (rank 0 is the agent)")
      ->excludes("--serve");
  cmd->allow_extras();
  cmd->footer(
      "Every other option goes to `orchard generate` on each rank, e.g.\n"
      "  orchard run --nodes 2 --parallel tensor -m model.gguf -p \"Hello\" -n 32 -t 1\n"
      "  orchard run --nodes 4 --parallel hybrid --tp 2 --backend tcp --link-latency-us 50\n"
      "  orchard run --nodes 2 --parallel expert -m moe.gguf -p \"Hello\"   # a mixture's experts over 2 ranks\n"
      "  orchard run --nodes 2 --serve --port 8080 -m model.gguf     # `orchard serve` over 2 ranks\n"
      "  orchard run --nodes 2 --node --parallel tensor --coordinator http://coord:8090 -m model.gguf");
  cmd->callback([o, cmd] {
    dist::LaunchOptions lo;
    lo.ranks = o->nodes;
    lo.backend = o->backend;
    lo.prefix = false;
    // Ranks share this machine's cores: more threads than cores make every rank's thread pool
    // fight the others' (measured: a quarter of the speed). The user's own -t comes later and wins.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    lo.command = {self_executable(), o->node ? "node" : o->serve ? "serve" : "generate", "--parallel", o->parallel, "-t",
                  std::to_string(std::max(1, cores / o->nodes))};
    bool has_model = false;
    for (const auto& a : cmd->remaining()) {
      lo.command.push_back(a);
      has_model |= a == "-m" || a == "--model" || a.rfind("--model=", 0) == 0;
    }
    // Create the built-in model once here, not in every rank at the same moment.
    if (!has_model) {
      const std::string path = default_model_path();
      std::fprintf(stderr, "using the built-in synthetic model %s (random weights: meaningless text)\n", path.c_str());
    }
    if (o->latency_us > 0) lo.extra_env.push_back("ORCHARD_LINK_LATENCY_US=" + std::to_string(o->latency_us));
    if (o->gbps > 0) lo.extra_env.push_back("ORCHARD_LINK_GBPS=" + std::to_string(o->gbps));
    const int rc = dist::launch(lo);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace orchard::cli
