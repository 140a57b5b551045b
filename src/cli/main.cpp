// The `orchard` command: one subcommand per file in this folder.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "platform/version.h"

int main(int argc, char** argv) {
  CLI::App app{"Orchard: run large language models on one machine or a cluster of them"};
  app.set_version_flag("--version", std::string("orchard ") + orchard::kVersion);
  app.require_subcommand(1);
  orchard::cli::register_generate(app);
  orchard::cli::register_info(app);
  orchard::cli::register_perplexity(app);
  orchard::cli::register_make_model(app);
  orchard::cli::register_bench(app);
  orchard::cli::register_launch(app);
  orchard::cli::register_run(app);
  orchard::cli::register_plan(app);
  orchard::cli::register_serve(app);
  orchard::cli::register_pull(app);
  orchard::cli::register_network(app);
  orchard::cli::register_node(app);
  orchard::cli::register_doctor(app);
  orchard::cli::register_cluster(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "orchard: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
