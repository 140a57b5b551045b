// Hostfiles come from users: any bytes must give a parsed file or an
// orchard::Error, nothing else.
#include <cstddef>
#include <cstdint>
#include <string>

#include "dist/hostfile.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    orchard::dist::parse_hostfile(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const orchard::Error&) {
  }
  return 0;
}
