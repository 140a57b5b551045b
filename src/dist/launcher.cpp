#include "dist/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "dist/net/auth.h"
#include "dist/net/socket.h"
#include "platform/platform.h"
#include "tensor/error.h"

extern char** environ;

namespace orchard::dist {
namespace {

using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string random_job() {
  const auto n = net::random_nonce();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%02x%02x%02x%02x%02x%02x%02x%02x", n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]);
  return buf;
}

struct Rank {
  int rank = 0;
  std::string where;
  pid_t pid = -1;
  int out = -1, err = -1;
  std::string out_buf, err_buf;
  bool done = false;
  int status = 0;
};

// Writes complete lines with the rank prefix; keeps a trailing partial line.
void flush_lines(std::string& buf, FILE* to, int rank, bool prefix, bool all) {
  size_t start = 0;
  for (;;) {
    const size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    if (prefix) std::fprintf(to, "[%d] ", rank);
    std::fwrite(buf.data() + start, 1, nl + 1 - start, to);
    start = nl + 1;
  }
  if (all && start < buf.size()) {
    if (prefix) std::fprintf(to, "[%d] ", rank);
    std::fwrite(buf.data() + start, 1, buf.size() - start, to);
    std::fputc('\n', to);
    start = buf.size();
  }
  buf.erase(0, start);
  std::fflush(to);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  return "ended (status " + std::to_string(status) + ")";
}

// Rank r of n gets cores [r·k, (r+1)·k) of the ones this process may use, k = cores / n.
void bind_to_cores(int r, int n) {
  const std::vector<int> cores = platform::allowed_cpus();
  const int k = static_cast<int>(cores.size()) / n;
  if (k < 1) return;  // oversubscribed (or unknown): let the scheduler share
  platform::pin_to_cpus(std::vector<int>(cores.begin() + r * k, cores.begin() + (r + 1) * k));
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

int launch(const LaunchOptions& o) {
  if (o.command.empty()) throw Error("launch: no command given (put it after --)");
  const bool remote = o.hostfile != nullptr;
  const int n = remote ? static_cast<int>(o.hostfile->hosts.size()) : o.ranks;
  if (n < 1) throw Error("launch: need at least one rank (-n N or --hostfile)");
  const std::string job = random_job();
  std::string coord_host = remote ? o.hostfile->hosts[0].address() : o.host;
  int port = o.port;
  if (port == 0) {
    if (remote) {
      port = 52111;
    } else {
      net::Fd probe = net::listen_on(net::Endpoint{o.host, 0});
      port = net::local_port(probe.get());
    }
  }
  const std::string coord = coord_host + ":" + std::to_string(port);
  std::string peers;
  for (int r = 0; r < n; ++r) {
    if (r) peers += ",";
    peers += remote ? o.hostfile->hosts[static_cast<size_t>(r)].address() : o.host;
  }
  char cwd[4096] = ".";
  if (!::getcwd(cwd, sizeof cwd)) std::strcpy(cwd, ".");

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  struct sigaction old_int {}, old_term {};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  g_interrupted = 0;

  std::vector<Rank> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    k.rank = r;
    const std::string my_host = remote ? o.hostfile->hosts[static_cast<size_t>(r)].address() : o.host;
    k.where = remote ? o.hostfile->hosts[static_cast<size_t>(r)].ssh : "local";
    std::vector<std::string> env = {
        "ORCHARD_RANK=" + std::to_string(r), "ORCHARD_SIZE=" + std::to_string(n), "ORCHARD_COORD=" + coord,
        "ORCHARD_HOST=" + my_host,           "ORCHARD_JOB=" + job,             "ORCHARD_BACKEND=" + o.backend,
        "ORCHARD_PEERS=" + peers,            "ORCHARD_TIMEOUT_S=" + std::to_string(o.timeout_s)};
    for (const auto& e : o.extra_env) env.push_back(e);
    std::vector<std::string> argv;
    bool feed_secret = false;
    if (remote) {
      std::string cmd = "cd " + shell_quote(cwd) + " 2>/dev/null; ";
      if (!o.secret.empty()) {
        // The secret travels on ssh's stdin, never on a command line.
        cmd += "IFS= read -r ORCHARD_SECRET; export ORCHARD_SECRET; ";
        feed_secret = true;
      }
      cmd += "exec env";
      for (const auto& e : env) cmd += " " + shell_quote(e);
      for (const auto& a : o.command) cmd += " " + shell_quote(a);
      argv = {o.ssh, "-o", "BatchMode=yes", o.hostfile->hosts[static_cast<size_t>(r)].ssh, cmd};
    } else {
      argv = o.command;
      if (!o.secret.empty()) env.push_back("ORCHARD_SECRET=" + o.secret);
    }
    int out_pipe[2], err_pipe[2], in_pipe[2];
    if (!platform::make_pipe(out_pipe, false) || !platform::make_pipe(err_pipe, false) || !platform::make_pipe(in_pipe, false))
      throw Error(std::string("launch: pipe: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(std::string("launch: fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);
      if (!remote && o.bind) bind_to_cores(r, n);
      ::dup2(in_pipe[0], 0);
      ::dup2(out_pipe[1], 1);
      ::dup2(err_pipe[1], 2);
      for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      std::fprintf(stderr, "orchard launch: cannot run '%s': %s\n", args[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    ::close(in_pipe[0]);
    if (feed_secret) {
      const std::string line = o.secret + "\n";
      [[maybe_unused]] ssize_t w = ::write(in_pipe[1], line.data(), line.size());
    }
    ::close(in_pipe[1]);
    k.pid = pid;
    k.out = out_pipe[0];
    k.err = err_pipe[0];
  }

  int first_failure = -1, result = 0;
  Clock::time_point stop_at = Clock::time_point::max(), kill_at = Clock::time_point::max();
  Clock::time_point decide_at = Clock::time_point::max();
  std::vector<Rank*> failed;  // in the order they were found ended
  bool stopping = false;
  auto terminate_all = [&](int sig) {
    for (auto& k : ranks)
      if (!k.done) ::kill(-k.pid, sig);
  };
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, bool>> who;
    for (auto& k : ranks) {
      if (k.out >= 0) {
        fds.push_back({k.out, POLLIN, 0});
        who.emplace_back(&k, false);
      }
      if (k.err >= 0) {
        fds.push_back({k.err, POLLIN, 0});
        who.emplace_back(&k, true);
      }
    }
    ::poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Rank& k = *who[i].first;
      const bool is_err = who[i].second;
      char buf[65536];
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      std::string& line_buf = is_err ? k.err_buf : k.out_buf;
      FILE* to = is_err ? stderr : stdout;
      if (got > 0) {
        line_buf.append(buf, static_cast<size_t>(got));
        flush_lines(line_buf, to, k.rank, o.prefix, false);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        flush_lines(line_buf, to, k.rank, o.prefix, true);
        ::close(fds[i].fd);
        (is_err ? k.err : k.out) = -1;
      }
    }
    for (auto& k : ranks) {
      if (k.done) continue;
      int status = 0;
      if (::waitpid(k.pid, &status, WNOHANG) != k.pid) continue;
      k.done = true;
      k.status = status;
      if (status != 0) failed.push_back(&k);
    }
    const bool all_done = [&] {
      for (auto& k : ranks)
        if (!k.done || k.out >= 0 || k.err >= 0) return false;
      return true;
    }();
    // A killed rank's peers see its sockets close while the kernel is still tearing it down, and
    // may exit on that error before it can be reaped: so wait a moment after the first failure,
    // then blame a rank killed by a signal over one that exited after noticing it.
    if (!failed.empty() && first_failure < 0 && decide_at == Clock::time_point::max())
      decide_at = Clock::now() + std::chrono::milliseconds(300);
    if (!failed.empty() && first_failure < 0 && (all_done || Clock::now() >= decide_at)) {
      const auto signaled = std::find_if(failed.begin(), failed.end(), [](Rank* k) { return WIFSIGNALED(k->status); });
      const Rank& cause = **(signaled != failed.end() ? signaled : failed.begin());
      first_failure = cause.rank;
      result = exit_code(cause.status);
      std::fprintf(stderr, "orchard launch: rank %d (%s) %s\n", cause.rank, cause.where.c_str(),
                   describe_status(cause.status).c_str());
      // The others notice through the group within its timeout; give them that long to say
      // why, then stop them.
      stop_at = Clock::now() + std::chrono::milliseconds(static_cast<int>(o.timeout_s * 1000) + 3000);
    }
    if (all_done) break;
    const auto now = Clock::now();
    if (g_interrupted && !stopping) {
      std::fprintf(stderr, "orchard launch: interrupted, stopping every rank\n");
      if (result == 0) result = 130;
      stop_at = now;
    }
    if (now >= stop_at && !stopping) {
      stopping = true;
      terminate_all(SIGTERM);
      kill_at = now + std::chrono::seconds(3);
    }
    if (now >= kill_at) {
      terminate_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

}  // namespace orchard::dist
