#pragma once
// Each subcommand lives in its own file and registers itself on the app here.
#include <CLI/CLI.hpp>

namespace orchard::cli {

void register_generate(CLI::App& app);
void register_info(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_make_model(CLI::App& app);
void register_bench(CLI::App& app);
void register_launch(CLI::App& app);
void register_run(CLI::App& app);
void register_plan(CLI::App& app);
void register_serve(CLI::App& app);
void register_pull(CLI::App& app);    // also `orchard models`
void register_network(CLI::App& app); // `orchard network serve|api-key|ledger`
void register_node(CLI::App& app);    // `orchard node`, `orchard node status`
void register_doctor(CLI::App& app);  // `orchard doctor`: readiness and links for a cluster
void register_cluster(CLI::App& app); // `orchard cluster up|status`: discovery, links, a plan
void register_bench_comm(CLI::App& bench);
void register_bench_parallel(CLI::App& bench);
void register_bench_serve(CLI::App& bench);

}  // namespace orchard::cli
