#include "test_data.h"

#include <cstdlib>
#include <fstream>
#include <cstring>
#include <stdexcept>

namespace orchard::test {

std::filesystem::path shared_data() {
  if (const char* env = std::getenv("ORCHARD_SHARED_DATA")) return env;
  return ORCHARD_SHARED_DATA;
}

std::filesystem::path repo_data() { return ORCHARD_REPO_DATA; }

std::filesystem::path data_file(const std::string& rel) {
  if (auto local = repo_data() / rel; std::filesystem::exists(local)) return local;
  return shared_data() / rel;
}

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && (std::strcmp(ci, "true") == 0 || std::strcmp(ci, "1") == 0);
}

std::string first_missing(std::initializer_list<std::string> rels) {
  for (const std::string& rel : rels)
    if (!std::filesystem::exists(data_file(rel))) return data_file(rel).string();
  return {};
}

std::vector<char> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

std::vector<float> read_f32(const std::filesystem::path& p) {
  auto bytes = read_bytes(p);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

std::string orchard_binary() { return ORCHARD_BINARY; }

}  // namespace orchard::test
