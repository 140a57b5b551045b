#include "node/machine.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <numeric>
#include <thread>
#include <vector>

#include "platform/platform.h"
#include "tensor/error.h"

namespace orchard::node {

uint64_t total_memory_bytes() { return platform::physical_memory_bytes(); }

int cpu_cores() { return std::max(1u, std::thread::hardware_concurrency()); }

double measure_bandwidth_gbs(size_t bytes) {
  const int threads = cpu_cores();
  std::vector<uint64_t> buf(bytes / sizeof(uint64_t));
  std::iota(buf.begin(), buf.end(), uint64_t{1});  // touch every page before timing
  const size_t per = buf.size() / static_cast<size_t>(threads);
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<uint64_t> sums(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const uint64_t* p = buf.data() + per * static_cast<size_t>(t);
        uint64_t s = 0;
        for (size_t i = 0; i < per; ++i) s += p[i];
        sums[static_cast<size_t>(t)] = s;
      });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The sums are used, so the reads cannot be optimized away.
    if (std::accumulate(sums.begin(), sums.end(), uint64_t{0}) == 0) return 0;
    best = std::max(best, static_cast<double>(per * static_cast<size_t>(threads) * sizeof(uint64_t)) / s / 1e9);
  }
  return best;
}

std::optional<double> load_per_core() {
  const std::optional<double> one = platform::load_average();
  if (!one) return std::nullopt;
  return *one / cpu_cores();
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) return "machine";
  return host;
}

protocol::MachineInfo this_machine(const std::string& chip, uint64_t memory_bytes, double bandwidth_gbs) {
  protocol::MachineInfo m;
  m.name = host_name();
  m.chip = chip;
  m.memory_bytes = memory_bytes > 0 ? memory_bytes : total_memory_bytes();
  if (m.memory_bytes == 0) throw Error("cannot read this machine's memory size (give it with --memory)");
  m.cores = cpu_cores();
  m.mem_bw_gbs = bandwidth_gbs > 0 ? bandwidth_gbs : measure_bandwidth_gbs();
  return m;
}

namespace {

[[noreturn]] void bad_window(const std::string& text) {
  throw Error("lending window '" + text + "': expected HH:MM-HH:MM in local time, e.g. 22:00-07:00");
}

int parse_clock(const std::string& text, const std::string& whole) {
  int h = -1, m = -1;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%d:%d%c", &h, &m, &extra) != 2 || h < 0 || h > 23 || m < 0 || m > 59) bad_window(whole);
  return h * 60 + m;
}

std::string clock_text(int minutes) {
  char b[32];
  std::snprintf(b, sizeof b, "%02d:%02d", minutes / 60, minutes % 60);
  return b;
}

}  // namespace

void LendingPolicy::set_window(const std::string& text) {
  const size_t dash = text.find('-');
  if (dash == std::string::npos) bad_window(text);
  window_begin = parse_clock(text.substr(0, dash), text);
  window_end = parse_clock(text.substr(dash + 1), text);
  if (*window_begin == *window_end) throw Error("lending window '" + text + "' is empty (begin = end)");
}

void LendingPolicy::set_idle_after(const std::string& text) {
  double value = 0;
  char unit = 's', extra = 0;
  const int n = std::sscanf(text.c_str(), "%lf%c%c", &value, &unit, &extra);
  const double scale = unit == 's' ? 1e3 : unit == 'm' ? 60e3 : unit == 'h' ? 3600e3 : 0;
  if ((n != 1 && n != 2) || scale == 0 || !(value >= 0) || value > 1e6)
    throw Error("idle time '" + text + "': expected a duration such as 90s, 5m or 1h");
  idle_after_ms = static_cast<int64_t>(value * scale);
}

bool LendingPolicy::user_is_active(std::optional<int64_t> user_idle_ms) const {
  return mode == protocol::Lending::WhenIdle && idle_after_ms && (!user_idle_ms || *user_idle_ms < *idle_after_ms);
}

std::string LendingPolicy::refusal(std::optional<double> load, int minute, std::optional<int64_t> user_idle_ms) const {
  if (mode == protocol::Lending::Dedicated) return {};
  if (window_begin && window_end) {
    const int b = *window_begin, e = *window_end;
    const bool inside = b < e ? (minute >= b && minute < e) : (minute >= b || minute < e);
    if (!inside) return "outside the lending window " + clock_text(b) + "-" + clock_text(e);
  }
  if (user_is_active(user_idle_ms)) {
    if (!user_idle_ms)
      return "cannot tell when the user was last active (no logind, no terminals), so the machine may be in use";
    char b[128];
    std::snprintf(b, sizeof b, "the user was active %llds ago (lending after %llds without input)",
                  static_cast<long long>(*user_idle_ms / 1000), static_cast<long long>(*idle_after_ms / 1000));
    return b;
  }
  if (!load) return "the CPU load cannot be read, so the machine may not be idle";
  if (*load > max_load) {
    char b[96];
    std::snprintf(b, sizeof b, "load %.2f per core is above %.2f", *load, max_load);
    return b;
  }
  return {};
}

int local_minute_of_day() {
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  return local.tm_hour * 60 + local.tm_min;
}

}  // namespace orchard::node
