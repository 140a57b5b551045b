#include "cli/args.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "platform/platform.h"
#include "tensor/error.h"

namespace orchard::cli {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string read_first_line(const std::string& path, const std::string& what, const std::string& command) {
  std::ifstream in(path);
  if (!in) throw Error(command + ": cannot read " + what + " " + path);
  std::string line;
  std::getline(in, line);
  if (line.empty()) throw Error(command + ": " + what + " " + path + " is empty");
  return line;
}

std::string read_secret(const std::string& file, const std::string& command) {
  if (!file.empty()) return read_first_line(file, "secret file", command);
  const char* env = std::getenv("ORCHARD_SECRET");
  return env ? env : "";
}

std::string self_executable() {
  std::string path = platform::executable_path();
  if (path.empty()) throw Error("cannot find the orchard executable's path");
  return path;
}

void add_kv_type_option(CLI::App* cmd, KVType& out) {
  cmd->add_option_function<std::string>(
         "--kv-type",
         [&out](const std::string& name) {
           if (!kv_type_from_name(name, out)) throw CLI::ValidationError("--kv-type", "'" + name + "' is not f32 or f16");
         },
         "KV cache element type: f32 (llama.cpp's -ctk f32 -ctv f32 logits) or f16 (llama.cpp's default: half "
         "the memory, faster attention over long or many contexts)")
      ->type_name("f32|f16")
      ->default_str(kv_type_name(out));
}

}  // namespace orchard::cli
