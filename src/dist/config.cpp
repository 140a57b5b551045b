#include "dist/config.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "dist/group.h"

namespace orchard::dist {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

double env_number(const char* name, double fallback, double lo, double hi) {
  const char* v = env(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const double d = std::stod(v, &used);
    if (used != std::string(v).size() || d < lo || d > hi) throw std::out_of_range(name);
    return d;
  } catch (const std::logic_error&) {
    throw CommError(std::string(name) + "='" + v + "' is not a number in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
  }
}

}  // namespace

std::map<int, std::string> parse_routes(const std::string& text, int size) {
  std::map<int, std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    const size_t eq = item.find('=');
    int rank = -1;
    try {
      size_t used = 0;
      if (eq != std::string::npos) rank = std::stoi(item.substr(0, eq), &used);
      if (used != eq) rank = -1;
    } catch (const std::logic_error&) {
      rank = -1;
    }
    if (rank < 0 || rank >= size || eq + 1 >= item.size() || out.count(rank))
      throw CommError("ORCHARD_ROUTES: '" + item + "' is not RANK=ADDRESS with a rank below " + std::to_string(size) +
                      " given once");
    out[rank] = item.substr(eq + 1);
    at = end + 1;
  }
  return out;
}

bool Config::in_job() { return env("ORCHARD_RANK") && env("ORCHARD_SIZE"); }

Config Config::from_env() {
  Config c;
  c.size = static_cast<int>(env_number("ORCHARD_SIZE", 1, 1, 4096));
  c.rank = static_cast<int>(env_number("ORCHARD_RANK", 0, 0, 4095));
  if (c.rank >= c.size)
    throw CommError("ORCHARD_RANK=" + std::to_string(c.rank) + " is not below ORCHARD_SIZE=" + std::to_string(c.size));
  if (const char* v = env("ORCHARD_COORD")) c.coordinator = v;
  if (const char* v = env("ORCHARD_HOST")) c.host = v;
  if (const char* v = env("ORCHARD_JOB")) c.job = v;
  if (const char* v = env("ORCHARD_SECRET")) c.secret = v;
  if (const char* v = env("ORCHARD_BACKEND")) c.backend = v;
  c.timeout_s = env_number("ORCHARD_TIMEOUT_S", c.timeout_s, 0.1, 86400);
  c.connect_timeout_s = env_number("ORCHARD_CONNECT_TIMEOUT_S", c.connect_timeout_s, 0.1, 86400);
  c.link_latency_us = env_number("ORCHARD_LINK_LATENCY_US", 0, 0, 1e7);
  c.link_gbps = env_number("ORCHARD_LINK_GBPS", 0, 0, 1e4);
  c.ring_bytes = static_cast<size_t>(env_number("ORCHARD_RING_BYTES", 0, 0, 1e12));
  if (const char* v = env("ORCHARD_TCP_CONGESTION")) c.tcp_congestion = v;
  if (const char* v = env("ORCHARD_ROUTES")) c.routes = parse_routes(v, c.size);
  return c;
}

}  // namespace orchard::dist
