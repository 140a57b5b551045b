#include "node/group.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

namespace orchard::node {
namespace {

// One rank's machine on the wire: fixed size, so one all_gather carries them all.
struct WireMachine {
  char name[64];
  char chip[64];
  uint64_t memory_bytes;
  double mem_bw_gbs, tflops;
  int32_t cores;
};

WireMachine to_wire(const protocol::MachineInfo& m) {
  WireMachine w{};
  std::strncpy(w.name, m.name.c_str(), sizeof w.name - 1);
  std::strncpy(w.chip, m.chip.c_str(), sizeof w.chip - 1);
  w.memory_bytes = m.memory_bytes;
  w.mem_bw_gbs = m.mem_bw_gbs;
  w.tflops = m.tflops;
  w.cores = m.cores;
  return w;
}

protocol::MachineInfo from_wire(const WireMachine& w) {
  protocol::MachineInfo m;
  m.name = std::string(w.name, strnlen(w.name, sizeof w.name));
  m.chip = std::string(w.chip, strnlen(w.chip, sizeof w.chip));
  m.memory_bytes = w.memory_bytes;
  m.mem_bw_gbs = w.mem_bw_gbs;
  m.tflops = w.tflops;
  m.cores = w.cores;
  return m;
}

using Clock = std::chrono::steady_clock;

double micros_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// Rank 0 sends `bytes` to `peer`, which answers with 8 bytes; the best of `rounds` round-trip
// times in µs (everyone calls it; only rank 0's and the peer's figure mean anything).
double round_trip_us(dist::Group& world, int peer, size_t bytes, int rounds, bool median) {
  std::vector<char> buf(bytes);
  uint64_t ack = 0;
  std::vector<double> t;
  for (int k = 0; k < rounds; ++k) {
    if (world.rank() == 0) {
      const auto t0 = Clock::now();
      world.send(buf.data(), buf.size(), peer);
      world.recv(&ack, sizeof ack, peer);
      t.push_back(micros_since(t0));
    } else if (world.rank() == peer) {
      world.recv(buf.data(), buf.size(), 0);
      world.send(&ack, sizeof ack, 0);
    }
  }
  if (t.empty()) return 0;
  std::sort(t.begin(), t.end());
  return median ? t[t.size() / 2] : t.front();
}

}  // namespace

GroupDescription describe_group(dist::Group& world, const protocol::MachineInfo& mine) {
  const int n = world.size();
  const WireMachine w = to_wire(mine);
  std::vector<WireMachine> all(static_cast<size_t>(n));
  world.all_gather(&w, all.data(), sizeof w);
  // The link from rank 0 to each peer: the slowest peer is what a step waits for.
  constexpr size_t kLarge = size_t{4} << 20;
  double latency_us = 0, gbs = 0;
  for (int r = 1; r < n; ++r) {
    const double small = round_trip_us(world, r, 8, 15, true);
    const double large = round_trip_us(world, r, kLarge, 4, false);
    const double one_way = small / 2;
    // The large message's time beyond a small one's is its bytes crossing.
    const double peer_gbs = static_cast<double>(kLarge) / std::max(large - small, 1.0) / 1e3;
    latency_us = std::max(latency_us, one_way);
    gbs = r == 1 ? peer_gbs : std::min(gbs, peer_gbs);
  }
  GroupDescription d;
  if (world.rank() != 0) return d;
  std::map<std::string, int> hosts;
  for (const WireMachine& m : all) ++hosts[from_wire(m).name];
  for (int r = 0; r < n; ++r) {
    protocol::MachineInfo m = from_wire(all[static_cast<size_t>(r)]);
    // Several ranks on one host (a local cluster): each rank is a member of its own.
    if (hosts[m.name] > 1) m.name += "#" + std::to_string(r);
    d.group.members.push_back(m.name);
    d.machines.push_back(std::move(m));
  }
  d.group.link = world.backend();
  d.group.latency_us = latency_us;
  d.group.gbs = std::max(gbs, 1e-3);
  return d;
}

}  // namespace orchard::node
