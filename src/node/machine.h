#pragma once
// What a node agent knows about the machine it runs on, and when its owner lets it lend it.
#include <cstdint>
#include <optional>
#include <string>

#include "protocol/node_info.h"

namespace orchard::node {

// MemTotal from /proc/meminfo, in bytes; 0 when it cannot be read.
uint64_t total_memory_bytes();
int cpu_cores();
// Read bandwidth in GB/s, from summing a `bytes` buffer on every core (best of a few passes;
// a fraction of a second). What generation speed follows, so what placement predicts from.
double measure_bandwidth_gbs(size_t bytes = size_t{256} << 20);
// The 1-minute load average per core (/proc/loadavg); nullopt when it cannot be read.
std::optional<double> load_per_core();
// "name:port"-free host name of this machine.
std::string host_name();

// This machine as a node reports it: host name, `chip`, cores, and the memory and bandwidth
// given (0: /proc/meminfo's MemTotal, and measured). A memory figure lets an owner lend less
// than the whole machine (and tests make placement's memory check bite on one box). Throws
// orchard::Error when the memory size cannot be read.
protocol::MachineInfo this_machine(const std::string& chip, uint64_t memory_bytes, double bandwidth_gbs);

// When the owner lets the node take work: always (dedicated), or while the machine is idle —
// CPU load per core at most `max_load`, and, if asked, its user away from it for at least
// `idle_after_ms` (activity.h) — and, if a window is given, inside it (local time;
// "22:00-07:00" spans midnight).
struct LendingPolicy {
  protocol::Lending mode = protocol::Lending::WhenIdle;
  double max_load = 0.5;
  std::optional<int> window_begin, window_end;  // minutes after local midnight
  std::optional<int64_t> idle_after_ms;         // no user input for this long

  // "HH:MM-HH:MM"; throws orchard::Error naming the text otherwise.
  void set_window(const std::string& text);
  // "90s", "5m", "1h", "300" (seconds); throws orchard::Error naming the text otherwise.
  void set_idle_after(const std::string& text);
  // Empty when lending is allowed now; else why not ("load 0.92 per core is above 0.50").
  // `user_idle_ms`: milliseconds since the user's last input (nullopt: unknown), consulted only
  // with idle_after_ms.
  std::string refusal(std::optional<double> load, int minute_of_day,
                      std::optional<int64_t> user_idle_ms = std::nullopt) const;
  // True when the user's activity alone refuses lending: what makes a node hand a running job
  // back at once (its own job's load must not).
  bool user_is_active(std::optional<int64_t> user_idle_ms) const;
};

// Minutes since local midnight, now.
int local_minute_of_day();

}  // namespace orchard::node
