// `orchard serve`: placeholder until the server lands.
#include "cli/commands.h"

namespace orchard::cli {
void register_serve(CLI::App&) {}
}  // namespace orchard::cli
