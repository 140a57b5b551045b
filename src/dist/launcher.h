#pragma once
// Starts the ranks of a job and supervises them, like mpirun or mlx.launch:
// every rank gets ORCHARD_RANK/SIZE/COORD/HOST/JOB/BACKEND in its
// environment; every output line is prefixed with "[rank] "; when a rank
// fails the others get the group's timeout to notice and fail on their own,
// after which the launcher stops them. Returns the job's exit status: 0 when
// all ranks succeeded, else the first failure's.
#include <string>
#include <vector>

#include "dist/hostfile.h"

namespace orchard::dist {

struct LaunchOptions {
  int ranks = 0;                  // local: how many processes
  const Hostfile* hostfile = nullptr;  // remote: one rank per host, over ssh
  std::vector<std::string> command;
  std::string backend = "tcp";
  std::string host = "127.0.0.1";  // local: interface the ranks listen on
  int port = 0;                    // coordinator port (0: a free one locally, 52111 remotely)
  std::string secret;              // "" : none
  double timeout_s = 10;
  std::string ssh = "ssh";         // ssh program (a wrapper may be given)
  std::vector<std::string> extra_env;  // NAME=value for every rank
  bool prefix = true;
  // Local ranks: give each its own share of the cores (sched_setaffinity) when there are at
  // least as many cores as ranks, as mpirun does; keeps ranks from migrating mid-token.
  bool bind = true;
};

int launch(const LaunchOptions& options);

}  // namespace orchard::dist
