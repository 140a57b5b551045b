#pragma once
// Measuring a link to a peer before trusting it with a split model: round-trip latency (small
// messages back and forth) and throughput (one large transfer), over plain TCP to a peer that
// answers probes (`orchard doctor --listen`). What the planner assumes of a link and what the
// wire gives can differ by 10× (Wi-Fi where a Thunderbolt bridge was meant); this says which.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "dist/net/socket.h"

namespace orchard::dist {

struct LinkMeasurement {
  double rtt_us = 0;    // median round trip of a 1-byte message
  double mbit_s = 0;    // one transfer of `bytes`, timed until the peer confirms
  uint64_t bytes = 0;
};

// Answers probes on `listen_fd` until `stop` is set (checked at least every 200 ms); at most 16
// at once (more are closed unanswered), at most 4 GiB a transfer.
void serve_link_probes(int listen_fd, const std::atomic<bool>& stop);

// Probes the peer: `pings` round trips, then `bytes` one way. Throws CommError naming the peer
// (refused, unreachable, no answer within `timeout`).
LinkMeasurement measure_link(const net::Endpoint& peer, std::chrono::milliseconds timeout, int pings = 50,
                             uint64_t bytes = 32ull << 20);

}  // namespace orchard::dist
