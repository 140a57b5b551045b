// `orchard doctor`: is this machine ready to be part of a cluster, and are its links to the
// others what a split model needs? Each check prints its outcome (ok, warn, fail) and, when not
// ok, what to do about it; the exit status is 1 when any check failed. Peers are measured
// against `orchard doctor --listen` running on them.
#include <sys/stat.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "dist/group.h"
#include "dist/link_probe.h"
#include "dist/make_group.h"
#include "dist/net/socket.h"
#include "dist/rdma/verbs.h"
#include "platform/platform.h"
#include "tensor/kernels/kernels.h"

namespace orchard::cli {
namespace {

constexpr uint16_t kProbePort = 29600;

struct DoctorOptions {
  std::vector<std::string> peers;
  bool listen = false;
  std::string host = "0.0.0.0";
  int port = kProbePort;
  int serve_port = 8080;
  std::string model;
  double timeout_s = 5;
  int probe_mib = 32;
};

struct Report {
  int failures = 0, warnings = 0;
  void line(const char* outcome, const std::string& check, const std::string& what, const std::string& fix = {}) {
    std::printf("  %-5s %-22s %s\n", outcome, check.c_str(), what.c_str());
    if (!fix.empty()) std::printf("  %-5s %-22s fix: %s\n", "", "", fix.c_str());
    if (std::string(outcome) == "fail") ++failures;
    if (std::string(outcome) == "warn") ++warnings;
  }
};

std::string gib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return b;
}

std::string subnet_of(const platform::NetInterface& n) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (std::sscanf(n.address.c_str(), "%u.%u.%u.%u", &a, &b, &c, &d) != 4) return n.address;
  uint32_t ip = (a << 24) | (b << 16) | (c << 8) | d;
  const uint32_t mask = n.prefix <= 0 ? 0 : n.prefix >= 32 ? 0xFFFFFFFFu : ~((1u << (32 - n.prefix)) - 1);
  ip &= mask;
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." + std::to_string((ip >> 8) & 255) + "." +
         std::to_string(ip & 255) + "/" + std::to_string(n.prefix);
}

bool port_free(int port) {
  try {
    dist::net::listen_on({"0.0.0.0", static_cast<uint16_t>(port)});
    return true;
  } catch (const dist::CommError&) {
    return false;
  }
}

void check_machine(const DoctorOptions& o, Report& r) {
  const unsigned cores = std::thread::hardware_concurrency();
  r.line("ok", "system",
         platform::os_version() + ", " + (platform::cpu_model().empty() ? "unknown CPU" : platform::cpu_model()) + ", " +
             std::to_string(cores) + " cores, kernels: " + kernels::isa_name(kernels::detect_isa()));
  const uint64_t total = platform::physical_memory_bytes();
  const auto avail = platform::available_memory_bytes();
  if (!avail) {
    r.line("warn", "memory", gib(total) + " installed; how much is free is unknown");
  } else if (!o.model.empty()) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(o.model, ec);
    if (ec) {
      r.line("fail", "model", o.model + ": " + ec.message(), "give the path of a GGUF file (orchard models lists them)");
    } else if (size + (size >> 3) > *avail) {
      r.line("fail", "memory", "the model needs about " + gib(size + (size >> 3)) + " with its caches; " + gib(*avail) +
                                   " of " + gib(total) + " is available",
             "split it over machines (orchard plan -m MODEL shows how), or free memory");
    } else {
      r.line("ok", "memory", gib(*avail) + " available of " + gib(total) + "; the model needs about " + gib(size + (size >> 3)));
    }
  } else {
    r.line("ok", "memory", gib(*avail) + " available of " + gib(total));
  }
}

void check_rdma(Report& r) {
  const std::vector<std::string> devices = dist::rdma::ib_device_names();
  if (!devices.empty()) {
    std::string names;
    for (const auto& d : devices) names += (names.empty() ? "" : ", ") + d;
    r.line("ok", "rdma", "devices: " + names + " (the rdma backend can use them)");
    return;
  }
#ifdef __APPLE__
  const char* fix =
      "RDMA over Thunderbolt needs Thunderbolt 5 on both Macs (M4 Pro/Max, M3 Ultra or newer), macOS 26.2 or newer, and "
      "`rdma_ctl enable` run once from recovery; until then ranks use TCP over the Thunderbolt link";
#else
  const char* fix =
      "for RDMA, an InfiniBand or RoCE network card with its driver and rdma-core (`ibv_devices` lists it); until then "
      "ranks use TCP";
#endif
  r.line("warn", "rdma",
         dist::rdma_available() ? "no RDMA devices found" : "this orchard was built without libibverbs", fix);
}

void check_interfaces(Report& r) {
  std::map<std::string, std::vector<std::string>> by_subnet;
  int usable = 0;
  for (const platform::NetInterface& n : platform::network_interfaces()) {
    if (n.loopback || !n.up) continue;
    ++usable;
    r.line("ok", "interface " + n.name, n.address + "/" + std::to_string(n.prefix) + (n.bridge ? " (a bridge)" : ""));
#ifdef __APPLE__
    if (n.bridge && n.name.rfind("bridge", 0) == 0)
      r.line("warn", "interface " + n.name,
             "the Thunderbolt Bridge is on: it joins the Thunderbolt ports into one network, so traffic between two Macs "
             "may not take the cable between them",
             "turn Thunderbolt Bridge off (System Settings > Network) and give each cable its own subnet");
#endif
    by_subnet[subnet_of(n)].push_back(n.name);
  }
  if (usable == 0)
    r.line("fail", "interfaces", "no network interface is up beyond loopback", "connect a cable or a network");
  for (const auto& [subnet, names] : by_subnet) {
    if (names.size() < 2) continue;
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    r.line("warn", "subnet " + subnet, list + " share it, so the system picks one of them for every peer on it",
           "one subnet per cable: give each link (each Thunderbolt cable, each NIC) its own subnet");
  }
}

void check_ports(const DoctorOptions& o, Report& r) {
  // (orchard cluster up's defaults: its status, link probes and rank 0; its announcements are UDP 52180)
  for (auto [port, what] : {std::pair{o.serve_port, "orchard serve"}, std::pair{o.port, "doctor probes"},
                            std::pair{52181, "cluster up's status"}, std::pair{52182, "cluster up's link probes"},
                            std::pair{52183, "cluster up's ranks"}}) {
    if (port_free(port)) r.line("ok", "port " + std::to_string(port), std::string("free for ") + what);
    else r.line("warn", "port " + std::to_string(port), std::string("in use (") + what + " would need another port)",
                "stop what holds it (`ss -ltnp sport = :" + std::to_string(port) + "`), or pick another port");
  }
}

void check_peer(const DoctorOptions& o, const std::string& text, Report& r) {
  dist::net::Endpoint peer;
  try {
    peer = dist::net::parse_endpoint(text.find(':') == std::string::npos ? text + ":" + std::to_string(kProbePort) : text, "--peer");
  } catch (const dist::CommError& e) {
    r.line("fail", "peer " + text, e.what(), "give HOST or HOST:PORT");
    return;
  }
  const std::string name = "peer " + peer.str();
  try {
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
    const dist::LinkMeasurement m = dist::measure_link(peer, timeout, 50, static_cast<uint64_t>(o.probe_mib) << 20);
    char what[160];
    std::snprintf(what, sizeof what, "round trip %.0f us, %.0f Mbit/s", m.rtt_us, m.mbit_s);
    if (m.rtt_us > 1000 || m.mbit_s < 1000)
      r.line("warn", name, std::string(what) + ": slow for a split model (each step waits on this link)",
             "is this the fast path? Wi-Fi or a slow cable often is not: use the peer's address on the fast interface "
             "(Thunderbolt, 10 GbE); `orchard bench comm` measures collectives over it");
    else
      r.line("ok", name, what);
  } catch (const dist::CommError& e) {
    r.line("fail", name, e.what(),
           "run `orchard doctor --listen` on " + peer.host + ", and let TCP " + std::to_string(peer.port) +
               " through its firewall");
  }
}

std::atomic<bool> g_doctor_stop{false};
void stop_doctor(int) { g_doctor_stop = true; }

int listen_for_probes(const DoctorOptions& o) {
  dist::net::Fd fd = dist::net::listen_on({o.host, static_cast<uint16_t>(o.port)});
  std::fprintf(stderr, "orchard doctor: answering link probes on %s:%u (Ctrl-C stops)\n", o.host.c_str(),
               dist::net::local_port(fd.get()));
  std::signal(SIGINT, stop_doctor);
  std::signal(SIGTERM, stop_doctor);
  dist::serve_link_probes(fd.get(), g_doctor_stop);
  return 0;
}

int run_doctor(const DoctorOptions& o) {
  if (o.listen) return listen_for_probes(o);
  std::printf("orchard doctor: this machine and its links, for a cluster\n");
  Report r;
  check_machine(o, r);
  check_rdma(r);
  check_interfaces(r);
  check_ports(o, r);
  for (const std::string& p : o.peers) check_peer(o, p, r);
  if (o.peers.empty())
    std::printf("  (no --peer given: run `orchard doctor --listen` on another machine and `orchard doctor --peer HOST` "
                "here to measure the link)\n");
  std::printf("%d failed, %d warnings\n", r.failures, r.warnings);
  return r.failures > 0 ? 1 : 0;
}

}  // namespace

void register_doctor(CLI::App& app) {
  auto o = std::make_shared<DoctorOptions>();
  auto* cmd = app.add_subcommand("doctor", "Check this machine and its links to peers for a cluster, and say what to fix");
  cmd->footer(
      "\nExamples:\n"
      "  orchard doctor                                   # this machine: memory, RDMA, interfaces, ports\n"
      "  orchard doctor -m model.gguf                     # ... and whether the model fits\n"
      "  orchard doctor --listen                          # on the peer: answer link probes on port 29600\n"
      "  orchard doctor --peer 10.0.0.2 --peer 10.0.1.2   # here: latency and bandwidth to each\n");
  cmd->add_option("--peer", o->peers, "A peer to measure the link to (HOST or HOST:PORT; it runs `orchard doctor --listen`)");
  cmd->add_flag("--listen", o->listen, "Answer link probes from other machines' `orchard doctor --peer` until stopped");
  cmd->add_option("--host", o->host, "Address to answer probes on (with --listen)")->capture_default_str();
  cmd->add_option("--port", o->port, "Probe port (listening, and the check that it is free)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--serve-port", o->serve_port, "The port orchard serve will use (checked free)")->capture_default_str()->check(CLI::Range(1, 65535));
  cmd->add_option("-m,--model", o->model, "A GGUF file: check that it fits in free memory");
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for each peer")->capture_default_str()->check(CLI::Range(0.1, 600.0));
  cmd->add_option("--probe-mib", o->probe_mib, "MiB sent to measure each peer's bandwidth")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->callback([o] {
    // The exit status says whether any check failed, without an error message.
    if (const int rc = run_doctor(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace orchard::cli
