#pragma once
// The golden folders' JSON files (llama.cpp's greedy runs and routing dumps), read whole.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace orchard::test {

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  return nlohmann::json::parse(in);
}

}  // namespace orchard::test
