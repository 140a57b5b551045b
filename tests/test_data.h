#pragma once
// Where the golden data lives, and a helper that skips a test (saying why) when it is absent.
#include <filesystem>
#include <string>
#include <vector>

namespace orchard::test {

// ../shared/data beside the checkout (override with ORCHARD_SHARED_DATA in the environment).
std::filesystem::path shared_data();
// Path of a file under shared_data(); empty when the folder is absent.
std::filesystem::path data_file(const std::string& rel);
// Reads a whole file as bytes (throws on failure).
std::vector<char> read_bytes(const std::filesystem::path& p);
// Reads raw little-endian float32 values.
std::vector<float> read_f32(const std::filesystem::path& p);
// The orchard binary built alongside the tests.
std::string orchard_binary();

}  // namespace orchard::test

// Skips the current test when the shared data folder is missing; CI always has it.
#define ORCHARD_REQUIRE_DATA()                                                         \
  do {                                                                                 \
    if (!std::filesystem::exists(::orchard::test::shared_data()))                      \
      GTEST_SKIP() << "shared data folder " << ::orchard::test::shared_data()          \
                   << " is absent; skipping (CI always has it)";                       \
  } while (0)
