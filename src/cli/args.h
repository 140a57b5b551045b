#pragma once
// Small helpers shared by the subcommands.
#include <string>
#include <vector>

namespace orchard::cli {

// "1,2,,4" -> {"1", "2", "4"} (empty items dropped).
std::vector<std::string> split_commas(const std::string& text);

// Path of the running orchard executable, for subcommands that start ranks of themselves.
std::string self_executable();

}  // namespace orchard::cli
