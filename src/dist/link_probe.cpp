#include "dist/link_probe.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "dist/group.h"

namespace orchard::dist {
namespace {

using Clock = net::Clock;

// Probe connections answered at once, and the most one transfer may send: a diagnostic listener
// anyone on the network can reach must not become a way to tie up the machine.
constexpr int kMaxProbes = 16;
constexpr uint64_t kMaxProbeBytes = 4ull << 30;

// One probe connection: 'p' is echoed; 'b' then 8 bytes of length, then that many bytes, is
// answered with one byte once read; anything else ends the connection.
void answer(net::Fd fd, const std::atomic<bool>& stop, std::atomic<int>& active) {
  struct Leave {
    std::atomic<int>& n;
    ~Leave() { --n; }
  } leave{active};
  std::vector<char> buf(1 << 20);
  try {
    while (!stop.load()) {
      char op = 0;
      // (A prober does not pause; a connection quiet for 2 s is closed, so stopping never waits long.)
      net::read_all(fd.get(), &op, 1, Clock::now() + std::chrono::seconds(2), "probe request");
      if (op == 'p') {
        net::write_all(fd.get(), &op, 1, Clock::now() + std::chrono::seconds(5), "probe answer");
      } else if (op == 'b') {
        uint64_t n = 0;
        net::read_all(fd.get(), &n, sizeof n, Clock::now() + std::chrono::seconds(5), "probe size");
        if (n > kMaxProbeBytes) return;
        while (n > 0 && !stop.load()) {
          const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, buf.size()));
          net::read_all(fd.get(), buf.data(), chunk, Clock::now() + std::chrono::seconds(60), "probe data");
          n -= chunk;
        }
        net::write_all(fd.get(), &op, 1, Clock::now() + std::chrono::seconds(5), "probe answer");
      } else {
        return;
      }
    }
  } catch (const CommError&) {
    // The prober left or stalled: nothing to report on this side.
  }
}

}  // namespace

void serve_link_probes(int listen_fd, const std::atomic<bool>& stop) {
  struct Probe {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Probe> probes;
  std::atomic<int> active{0};
  auto reap = [&](bool all) {
    for (auto it = probes.begin(); it != probes.end();) {
      if (all || it->done->load()) {
        it->thread.join();
        it = probes.erase(it);
      } else {
        ++it;
      }
    }
  };
  try {
    while (!stop.load()) {
      reap(false);
      std::string from;
      net::Fd fd = net::accept_until(listen_fd, Clock::now() + std::chrono::milliseconds(200), &from);
      if (!fd || active.load() >= kMaxProbes) continue;  // (over the limit: closed unanswered)
      net::set_nodelay(fd.get());
      auto done = std::make_shared<std::atomic<bool>>(false);
      ++active;
      probes.push_back({std::thread([fd = std::move(fd), &stop, &active, done]() mutable {
                          answer(std::move(fd), stop, active);
                          done->store(true);
                        }),
                        done});
    }
  } catch (...) {
    reap(true);
    throw;
  }
  reap(true);
}

LinkMeasurement measure_link(const net::Endpoint& peer, std::chrono::milliseconds timeout, int pings, uint64_t bytes) {
  const auto deadline = Clock::now() + timeout;
  net::Fd fd = net::connect_to(peer, deadline);
  net::set_nodelay(fd.get());
  const std::string what = "probe of " + peer.str();
  LinkMeasurement m;
  std::vector<double> rtts;
  for (int i = 0; i < pings; ++i) {
    char op = 'p';
    const auto t0 = Clock::now();
    net::write_all(fd.get(), &op, 1, deadline, what);
    net::read_all(fd.get(), &op, 1, deadline, what);
    rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(rtts.begin(), rtts.end());
  m.rtt_us = rtts.empty() ? 0 : rtts[rtts.size() / 2];
  if (bytes > 0) {
    std::vector<char> buf(1 << 20, 'x');
    const auto t0 = Clock::now();
    char op = 'b';
    net::write_all(fd.get(), &op, 1, deadline, what);
    net::write_all(fd.get(), &bytes, sizeof bytes, deadline, what);
    for (uint64_t left = bytes; left > 0;) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      net::write_all(fd.get(), buf.data(), chunk, deadline, what);
      left -= chunk;
    }
    net::read_all(fd.get(), &op, 1, deadline, what);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    m.bytes = bytes;
    m.mbit_s = s > 0 ? static_cast<double>(bytes) * 8 / s / 1e6 : 0;
  }
  char bye = 'q';
  try {
    net::write_all(fd.get(), &bye, 1, Clock::now() + std::chrono::seconds(1), what);
  } catch (const CommError&) {
  }
  return m;
}

}  // namespace orchard::dist
