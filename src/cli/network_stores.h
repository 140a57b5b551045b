#pragma once
// What the offline network tools (api-key, credit, model, canary) open: the stores of a
// coordinator given by its --data DIR (created when absent) or its --db URL, exactly one of them.
#include <CLI/CLI.hpp>
#include <string>

#include "network/coordinator.h"

namespace orchard::cli {

network::CoordinatorFiles offline_stores(const std::string& dir, const std::string& db);
// `orchard network canary add|list|remove` (cmd_network_canary.cpp).
void register_network_canary(CLI::App& network);
// `orchard network load` (cmd_network_load.cpp).
void register_network_load(CLI::App& network);

}  // namespace orchard::cli
