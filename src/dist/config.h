#pragma once
// How a rank learns who it is and whom to talk to. The launcher (or mpirun,
// or a person) sets these environment variables; flags may override them.
//   ORCHARD_RANK, ORCHARD_SIZE     this rank and the number of ranks
//   ORCHARD_COORD                  host:port where rank 0 listens for the others
//   ORCHARD_HOST                   the interface this rank listens on (never all of them)
//   ORCHARD_JOB                    job id; ranks of another job are refused
//   ORCHARD_SECRET                 cluster secret: HMAC challenge-response on every connection
//   ORCHARD_BACKEND                tcp | shm | mpi | rdma
//   ORCHARD_TIMEOUT_S              a silent or dead peer fails the others within this (10)
//   ORCHARD_CONNECT_TIMEOUT_S      how long ranks wait for each other at start (60)
//   ORCHARD_LINK_LATENCY_US        emulated per-message latency (tcp)
//   ORCHARD_LINK_GBPS              emulated link bandwidth cap (tcp)
//   ORCHARD_RING_BYTES             tcp: messages at least this big use the ring all_sum
//   ORCHARD_ROUTES                 "1=10.0.1.2,3=10.0.3.2": the address this rank reaches each
//                                  listed rank at (machines cabled pairwise, a subnet per cable);
//                                  with routes every rank listens on all its interfaces
#include <cstddef>
#include <map>
#include <string>

namespace orchard::dist {

struct Config {
  int rank = 0;
  int size = 1;
  std::string coordinator = "127.0.0.1:0";
  std::string host = "127.0.0.1";
  std::string job = "orchard";
  std::string secret;
  std::string backend = "tcp";
  double timeout_s = 10.0;
  double connect_timeout_s = 60.0;
  double link_latency_us = 0.0;
  double link_gbps = 0.0;
  size_t ring_bytes = 0;  // 0: the measured default
  // Congestion control of the tcp backend's data sockets; "" or "system" keeps the OS default.
  // BBR (a common default) paces each connection to its estimate of the path's rate, which holds
  // back the bursts a collective sends on a LAN or loopback: 2 ranks on loopback, 1-16 MiB, cubic
  // took 0.45-0.85 of BBR's time (docs/benchmarks.md).
  std::string tcp_congestion = "cubic";
  // Where this rank reaches other ranks, when not at the address each advertises (ORCHARD_ROUTES).
  std::map<int, std::string> routes;

  // Reads the ORCHARD_* variables; throws CommError naming a malformed one.
  static Config from_env();
  // True when the environment describes a multi-rank job.
  static bool in_job();
};

// "1=10.0.1.2,3=10.0.3.2" -> {1: "10.0.1.2", 3: "10.0.3.2"}; throws CommError naming the item.
std::map<int, std::string> parse_routes(const std::string& text, int size);

}  // namespace orchard::dist
