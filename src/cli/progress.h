#pragma once
// A one-line progress bar on stderr, redrawn in place; silent when stderr is not a terminal
// except for the final line, so logs stay readable.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace orchard::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label) : label_(std::move(label)), tty_(isatty(2) != 0) {}

  void update(int64_t done, int64_t total) {
    if (!tty_ && done < total) return;
    const int width = 30;
    const int filled = total > 0 ? static_cast<int>(width * done / total) : width;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::fprintf(stderr, "\r%s [%s%s] %lld/%lld  %.1fs%s", label_.c_str(),
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(),
                 static_cast<long long>(done), static_cast<long long>(total), secs,
                 done >= total ? "\n" : "");
    std::fflush(stderr);
  }

 private:
  std::string label_;
  bool tty_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace orchard::cli
