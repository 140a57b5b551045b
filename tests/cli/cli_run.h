#pragma once
// Runs the orchard binary as a user would, keeping stdout and stderr apart: generated text must
// be all that reaches stdout.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "test_data.h"

namespace orchard {

struct Out {
  int code;
  std::string out, err;
};

// The standard output of a shell command line (a command inside a network namespace, say).
inline std::string shell_output(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

inline Out run(const std::string& args) {
  const std::string err_path = ::testing::TempDir() + "orchard-run-" + std::to_string(::getpid()) + ".err";
  const std::string cmd = test::orchard_binary() + " " + args + " 2>" + err_path;
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = p ? pclose(p) : -1;
  std::string err;
  if (FILE* f = std::fopen(err_path.c_str(), "r")) {
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) err.append(buf, n);
    std::fclose(f);
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err};
}

}  // namespace orchard
