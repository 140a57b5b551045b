#include "dist/net/mesh.h"

#include <sys/socket.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "dist/group.h"
#include "platform/platform.h"
#include "dist/net/auth.h"

namespace orchard::dist::net {
namespace {

constexpr uint32_t kMeshMagic = 0x4843524F;  // "ORCH"
constexpr size_t kHostLen = 64;

// Wire structs are plain bytes on both ends (same-endian clusters; x86 and
// arm64 are both little-endian).
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t channel;
  uint32_t rank;
  uint32_t size;
  uint64_t job_hash;
  Nonce nonce;
  char host[kHostLen];  // where the sender listens (rendezvous only)
  uint16_t port;
  uint16_t pad[3];
};

struct Challenge {
  uint32_t magic;
  uint16_t version;
  uint16_t status;  // 0 ok, 1 wrong version, 2 wrong job or size
  Nonce nonce;
  Mac mac;
};

struct Verdict {
  uint32_t ok;
};

struct TableEntry {
  char host[kHostLen];
  uint16_t port;
  uint16_t pad[3];
};

uint64_t hash_job(const std::string& job) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : job) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string context(const Hello& h) {
  return std::to_string(h.rank) + "/" + std::to_string(h.channel) + "/" + std::to_string(h.job_hash);
}

// The connecting side of the handshake; throws on any refusal.
void handshake_connect(int fd, const Config& c, int channel, const std::string& my_host, uint16_t my_port,
                       const std::string& peer, Clock::time_point deadline) {
  Hello h{};
  h.magic = kMeshMagic;
  h.version = kProtocolVersion;
  h.channel = static_cast<uint16_t>(channel);
  h.rank = static_cast<uint32_t>(c.rank);
  h.size = static_cast<uint32_t>(c.size);
  h.job_hash = hash_job(c.job);
  h.nonce = random_nonce();
  std::snprintf(h.host, sizeof h.host, "%s", my_host.c_str());
  h.port = my_port;
  const std::string what = "handshake with " + peer;
  write_all(fd, &h, sizeof h, deadline, what);
  Challenge ch{};
  read_all(fd, &ch, sizeof ch, deadline, what);
  if (ch.magic != kMeshMagic) throw CommError(peer + " is not an orchard rank (bad magic in its reply)");
  if (ch.status == 1 || ch.version != kProtocolVersion)
    throw CommError(peer + " speaks orchard protocol v" + std::to_string(ch.version) + ", this rank speaks v" +
                    std::to_string(kProtocolVersion) + ": run the same orchard version on every machine");
  if (ch.status == 2)
    throw CommError(peer + " belongs to another job or a job of another size (this rank: job '" + c.job +
                    "', size " + std::to_string(c.size) + ")");
  if (!macs_equal(ch.mac, auth_mac(c.secret, 'A', h.nonce, ch.nonce, context(h))))
    throw CommError(peer + " failed authentication: the cluster secrets (ORCHARD_SECRET) differ");
  const Mac mine = auth_mac(c.secret, 'C', ch.nonce, h.nonce, context(h));
  write_all(fd, mine.data(), mine.size(), deadline, what);
  Verdict v{};
  read_all(fd, &v, sizeof v, deadline, what + " (refused by the peer: cluster secrets differ?)");
  if (v.ok != 1) throw CommError(peer + " refused this rank's authentication: the cluster secrets differ");
}

}  // namespace

// The accepting side; returns false (after logging) for a refused stranger.
static bool handshake_accept(int fd, const Config& c, const std::string& from, Hello* out) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  auto refuse = [&](const std::string& why) {
    std::fprintf(stderr, "orchard rank %d: refused connection from %s: %s\n", c.rank, from.c_str(), why.c_str());
    return false;
  };
  try {
    Hello h{};
    read_all(fd, &h, sizeof h, deadline, "handshake from " + from);
    if (h.magic != kMeshMagic) return refuse("not an orchard peer (bad magic)");
    Challenge ch{};
    ch.magic = kMeshMagic;
    ch.version = kProtocolVersion;
    ch.nonce = random_nonce();
    if (h.version != kProtocolVersion) {
      ch.status = 1;
      write_all(fd, &ch, sizeof ch, deadline, "handshake reply");
      return refuse("protocol v" + std::to_string(h.version) + ", this rank speaks v" +
                    std::to_string(kProtocolVersion));
    }
    if (h.job_hash != hash_job(c.job) || h.size != static_cast<uint32_t>(c.size) ||
        h.rank >= static_cast<uint32_t>(c.size)) {
      ch.status = 2;
      write_all(fd, &ch, sizeof ch, deadline, "handshake reply");
      return refuse("another job, size or rank (rank " + std::to_string(h.rank) + ", size " +
                    std::to_string(h.size) + ")");
    }
    ch.mac = auth_mac(c.secret, 'A', h.nonce, ch.nonce, context(h));
    write_all(fd, &ch, sizeof ch, deadline, "handshake reply");
    Mac theirs{};
    read_all(fd, theirs.data(), theirs.size(), deadline, "handshake from " + from);
    Verdict v{};
    v.ok = macs_equal(theirs, auth_mac(c.secret, 'C', ch.nonce, h.nonce, context(h))) ? 1 : 0;
    write_all(fd, &v, sizeof v, deadline, "handshake reply");
    if (!v.ok) return refuse("authentication failed (wrong cluster secret)");
    h.host[kHostLen - 1] = 0;
    *out = h;
    return true;
  } catch (const CommError& e) {
    return refuse(e.what());
  }
}

bool accept_handshake(int fd, const Config& config, const std::string& from, int* rank, int* lane) {
  Hello h{};
  if (!handshake_accept(fd, config, from, &h)) return false;
  *rank = static_cast<int>(h.rank);
  *lane = h.channel;
  return true;
}

std::shared_ptr<Mesh> Mesh::connect(const Config& c, int channels) {
  std::shared_ptr<Mesh> m(new Mesh());
  m->config_ = c;
  m->rank_ = c.rank;
  m->size_ = c.size;
  const int n = c.size;
  const int lanes = channels + 1;  // lane 0 is the control connection
  std::vector<std::vector<Fd>> conns(n);
  for (auto& v : conns) v.resize(lanes);
  m->hosts_.assign(n, "");
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(c.connect_timeout_s));
  const Endpoint coord = parse_endpoint(c.coordinator, "ORCHARD_COORD");
  // With routes the peers come in over different cables, so every interface listens (each
  // connection is still authenticated by the handshake).
  const std::string any = "0.0.0.0";
  Fd listener = c.rank == 0 ? listen_on(c.routes.empty() ? coord : Endpoint{any, coord.port})
                            : listen_on(Endpoint{c.routes.empty() ? c.host : any, 0});
  const uint16_t my_port = local_port(listener.get());
  const std::string my_host = c.rank == 0 ? coord.host : c.host;
  m->hosts_[c.rank] = my_host + ":" + std::to_string(my_port);

  // Accept everything addressed to this rank on a helper thread, so that
  // connecting and accepting never wait on each other.
  int expected = 0;
  for (int r = c.rank + 1; r < n; ++r) expected += lanes;
  std::mutex mu;
  std::condition_variable cv;
  int accepted = 0;
  std::exception_ptr accept_error;
  std::thread acceptor([&] {
    try {
      while (true) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (accepted == expected) return;
        }
        std::string from;
        Fd fd = accept_until(listener.get(), deadline, &from);
        if (!fd) throw CommError("timed out after " + std::to_string(static_cast<int>(c.connect_timeout_s)) +
                                 " s waiting for the other ranks to connect to rank " + std::to_string(c.rank) +
                                 " at " + m->hosts_[c.rank]);
        Hello h{};
        if (!handshake_accept(fd.get(), c, from, &h)) continue;
        std::lock_guard<std::mutex> lock(mu);
        if (static_cast<int>(h.rank) <= c.rank || h.channel >= lanes || conns[h.rank][h.channel]) {
          std::fprintf(stderr, "orchard rank %d: refused unexpected connection from rank %u lane %u (%s)\n",
                       c.rank, h.rank, h.channel, from.c_str());
          continue;
        }
        if (h.channel == 0) m->hosts_[h.rank] = std::string(h.host) + ":" + std::to_string(h.port);
        conns[h.rank][h.channel] = std::move(fd);
        ++accepted;
        cv.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      accept_error = std::current_exception();
      cv.notify_all();
    }
  });

  std::exception_ptr error;
  try {
    std::vector<TableEntry> table(n);
    if (c.rank == 0) {
      // Wait for every control connection, then publish where everyone listens.
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_until(lock, deadline, [&] {
        if (accept_error) return true;
        for (int r = 1; r < n; ++r)
          if (!conns[r][0]) return false;
        return true;
      });
      if (accept_error) std::rethrow_exception(accept_error);
      for (int r = 0; r < n; ++r) {
        if (r > 0 && !conns[r][0])
          throw CommError("rank " + std::to_string(r) + " never reached the coordinator " + c.coordinator +
                          " within " + std::to_string(static_cast<int>(c.connect_timeout_s)) + " s");
        const std::string& hp = m->hosts_[r];
        const auto colon = hp.rfind(':');
        std::snprintf(table[r].host, kHostLen, "%s", hp.substr(0, colon).c_str());
        table[r].port = static_cast<uint16_t>(std::stoi(hp.substr(colon + 1)));
      }
      lock.unlock();
      for (int r = 1; r < n; ++r)
        write_all(conns[r][0].get(), table.data(), sizeof(TableEntry) * n, deadline, "sending the rank table");
    } else {
      conns[0][0] = connect_to(coord, deadline);
      handshake_connect(conns[0][0].get(), c, 0, my_host, my_port, "rank 0 (" + c.coordinator + ")", deadline);
      read_all(conns[0][0].get(), table.data(), sizeof(TableEntry) * n, deadline,
               "reading the rank table from rank 0");
      for (int r = 0; r < n; ++r) {
        table[r].host[kHostLen - 1] = 0;
        m->hosts_[r] = std::string(table[r].host) + ":" + std::to_string(table[r].port);
      }
      for (int r = 0; r < c.rank; ++r)
        for (int lane = 0; lane < lanes; ++lane) {
          if (r == 0 && lane == 0) continue;
          const auto route = c.routes.find(r);
          const Endpoint e{route != c.routes.end() ? route->second : std::string(table[r].host), table[r].port};
          conns[r][lane] = connect_to(e, deadline);
          handshake_connect(conns[r][lane].get(), c, lane, my_host, my_port,
                            "rank " + std::to_string(r) + " (" + e.str() + ")", deadline);
        }
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (error) {
    // Unblock the acceptor: closing the listener makes its poll fail fast.
    ::shutdown(listener.get(), SHUT_RDWR);
  }
  acceptor.join();
  if (error) std::rethrow_exception(error);
  if (accept_error) std::rethrow_exception(accept_error);

  m->names_.resize(n);
  for (int r = 0; r < n; ++r) m->names_[r] = std::to_string(r) + " (" + m->hosts_[r] + ")";
  std::vector<Fd> control(n);
  m->data_.resize(n);
  for (int r = 0; r < n; ++r) {
    control[r] = std::move(conns[r][0]);
    for (int lane = 1; lane < lanes; ++lane) {
      if (conns[r][lane]) {
        set_nonblocking(conns[r][lane].get());
        // Best effort: an algorithm the kernel lacks (or a non-Linux OS) leaves the default.
        if (!c.tcp_congestion.empty() && c.tcp_congestion != "system")
          platform::set_tcp_congestion(conns[r][lane].get(), c.tcp_congestion);
      }
      m->data_[r].push_back(std::move(conns[r][lane]));
    }
  }
  m->monitor_ = std::make_unique<PeerMonitor>(c.rank, std::move(control), m->names_, c.timeout_s);
  return m;
}

int Mesh::ranks_on_this_host() const {
  auto ip = [](const std::string& hp) { return hp.substr(0, hp.rfind(':')); };
  int n = 0;
  for (const auto& h : hosts_) n += ip(h) == ip(hosts_[rank_]);
  return n;
}

Mesh::~Mesh() {
  if (monitor_) monitor_->goodbye();
}

}  // namespace orchard::dist::net
