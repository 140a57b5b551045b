#include "cli/args.h"

#include <unistd.h>

#include <sstream>

#include "tensor/error.h"

namespace orchard::cli {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string self_executable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error("cannot find the orchard executable (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace orchard::cli
