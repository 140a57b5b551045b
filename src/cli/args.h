#pragma once
// Small helpers shared by the subcommands.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tensor/attention.h"

namespace orchard::cli {

// --kv-type f32|f16: what the KV caches keep keys and values in; `out` holds the default.
void add_kv_type_option(CLI::App* cmd, KVType& out);

// "1,2,,4" -> {"1", "2", "4"} (empty items dropped).
std::vector<std::string> split_commas(const std::string& text);

// The first line of `path` (a secret, a key), which must be there and not empty; throws
// orchard::Error "<command>: cannot read <what> <path>" / "<command>: <what> <path> is empty".
std::string read_first_line(const std::string& path, const std::string& what, const std::string& command);
// The cluster secret: the first line of `file` when given, else $ORCHARD_SECRET, else "".
std::string read_secret(const std::string& file, const std::string& command);

// Path of the running orchard executable, for subcommands that start ranks of themselves.
std::string self_executable();

}  // namespace orchard::cli
