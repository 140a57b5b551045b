// Built when libpq was not found at configure time: the SQLite backend works, and asking for
// PostgreSQL says what is missing.
#include "network/database.h"

namespace orchard::network::sql {

std::unique_ptr<Connection> open_postgres(const std::string&, const FileKind& kind) {
  throw Error(std::string("this orchard was built without PostgreSQL support, so the ") + kind.noun +
              " cannot be opened on a postgresql:// URL: install libpq-dev (scripts/install-deps.sh) and rebuild");
}

}  // namespace orchard::network::sql
