#pragma once
// Where the golden data lives, and a helper that skips a test (saying why) when it is absent.
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

namespace orchard::test {

// ../shared/data beside the checkout (override with ORCHARD_SHARED_DATA in the environment).
std::filesystem::path shared_data();
// tests/data in the repository: the stories260K model, its Q8_0/Q4_0 variants and their
// llama.cpp goldens, so a fresh clone runs the engine's golden tests (README there).
std::filesystem::path repo_data();
// Path of a file: its copy under repo_data() when there is one, else under shared_data().
std::filesystem::path data_file(const std::string& rel);
// Reads a whole file as bytes (throws on failure).
std::vector<char> read_bytes(const std::filesystem::path& p);
// Reads raw little-endian float32 values.
std::vector<float> read_f32(const std::filesystem::path& p);
// The orchard binary built alongside the tests.
std::string orchard_binary();
// CI=true (or 1) in the environment: missing test data is then a failure, not a skip.
bool in_ci();
// The first of `rels` that data_file() does not find, or empty when all are there.
std::string first_missing(std::initializer_list<std::string> rels);

}  // namespace orchard::test

// Skips the current test when the shared data folder is missing, saying so; with CI=true fails
// instead, naming the path.
#define ORCHARD_REQUIRE_DATA()                                                                        \
  do {                                                                                                \
    if (!std::filesystem::exists(::orchard::test::shared_data())) {                                   \
      if (::orchard::test::in_ci())                                                                   \
        GTEST_FAIL() << "CI=true but the shared data folder " << ::orchard::test::shared_data()      \
                     << " is absent";                                                                 \
      GTEST_SKIP() << "shared data folder " << ::orchard::test::shared_data() << " is absent; skipping"; \
    }                                                                                                 \
  } while (0)

// The same for files that may live in the repository (tests/data) or the shared folder.
#define ORCHARD_REQUIRE_FILES(...)                                                                    \
  do {                                                                                                \
    if (const std::string missing_ = ::orchard::test::first_missing({__VA_ARGS__}); !missing_.empty()) { \
      if (::orchard::test::in_ci()) GTEST_FAIL() << "CI=true but test data " << missing_ << " is absent"; \
      GTEST_SKIP() << "test data " << missing_ << " is absent; skipping";                             \
    }                                                                                                 \
  } while (0)
