// `orchard pull` and `orchard models`: placeholder until the model store lands.
#include "cli/commands.h"

namespace orchard::cli {
void register_pull(CLI::App&) {}
}  // namespace orchard::cli
