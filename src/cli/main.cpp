// The `orchard` command: one subcommand per file in this folder.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "tensor/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Orchard: run large language models on one machine or a cluster of them"};
  app.require_subcommand(1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "orchard: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
