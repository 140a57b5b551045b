#pragma once
// Starts rank processes with their own environment and stderr file, and
// waits for them with a deadline (a test that hangs is a failed test).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace orchard::dist::testing {

// A loopback port free when asked, for a server a test starts next. Drawn below Linux's
// ephemeral range (32768–60999), which the kernel hands to every outgoing connection: a port
// from that range, released before the server binds it, was taken in between by one of the
// other tests' connections often enough to fail a parallel run ("Address already in use").
inline int free_port() {
  static std::mt19937 draw{std::random_device{}()};
  for (int tries = 0; tries < 200; ++tries) {
    const int port = std::uniform_int_distribution<int>(20000, 32767)(draw);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (free) return port;
  }
  return 0;
}

struct Proc {
  pid_t pid = -1;
  std::string out_path, err_path;
  std::optional<int> status;

  std::string err() const { return slurp(err_path); }
  std::string out() const { return slurp(out_path); }
  static std::string slurp(const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

inline Proc spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& tag) {
  Proc p;
  // The test program's pid in the name: CTest runs test cases in parallel processes, and two
  // of them spawning a "coordinator" must not write one file.
  const std::string base = ::testing::TempDir() + tag + "-" + std::to_string(::getpid());
  p.out_path = base + ".out";
  p.err_path = base + ".err";
  p.pid = ::fork();
  if (p.pid == 0) {
    const int out = ::open(p.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(p.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  return p;
}

// Waits for every process until the deadline; returns false if any is
// still running then (those are killed).
inline bool wait_all(std::vector<Proc*> procs, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    bool running = false;
    for (Proc* p : procs) {
      if (p->status) continue;
      int st = 0;
      if (::waitpid(p->pid, &st, WNOHANG) == p->pid)
        p->status = st;
      else
        running = true;
    }
    if (!running) return true;
    if (std::chrono::steady_clock::now() > deadline) {
      for (Proc* p : procs)
        if (!p->status) {
          ::kill(p->pid, SIGKILL);
          int st = 0;
          ::waitpid(p->pid, &st, 0);
          p->status = st;
        }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline int exit_code(const Proc& p) {
  if (!p.status) return -1;
  return WIFEXITED(*p.status) ? WEXITSTATUS(*p.status) : 128 + WTERMSIG(*p.status);
}

}  // namespace orchard::dist::testing
