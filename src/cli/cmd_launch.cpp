// `orchard launch`: start N local ranks, or one rank per host of a hostfile
// over ssh, with the ORCHARD_* environment every backend reads.
#include <cstdlib>
#include <memory>

#include "cli/args.h"
#include "cli/commands.h"
#include "dist/hostfile.h"
#include "dist/launcher.h"
#include "tensor/error.h"

namespace orchard::cli {

void register_launch(CLI::App& app) {
  struct Opts {
    dist::LaunchOptions launch;
    std::string hostfile, secret_file;
    bool no_prefix = false, no_bind = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("launch", "Start the ranks of a distributed job (locally or over ssh)");
  cmd->footer(
      "Examples:\n"
      "  orchard launch -n 2 -- orchard bench comm\n"
      "  orchard launch --hostfile hosts.json --backend tcp -- orchard generate -m model.gguf -p Hi\n"
      "Each rank gets ORCHARD_RANK, ORCHARD_SIZE, ORCHARD_COORD, ORCHARD_HOST, ORCHARD_JOB,\n"
      "ORCHARD_BACKEND, ORCHARD_PEERS and ORCHARD_TIMEOUT_S; output lines are prefixed with [rank].\n"
      "Hostfile (mlx.launch shape): {\"hosts\": [{\"ssh\": \"mac1\", \"ips\": [\"10.0.0.1\"]}, ...]}");
  cmd->add_option("-n,--ranks", o->launch.ranks, "Number of local ranks");
  cmd->add_option("--hostfile", o->hostfile, "JSON hostfile: one rank per host, started over ssh");
  cmd->add_option("--backend", o->launch.backend, "tcp, shm, mpi or rdma")->capture_default_str();
  cmd->add_option("--host", o->launch.host, "Local ranks listen on this interface only")->capture_default_str();
  cmd->add_option("--port", o->launch.port, "Coordinator port (default: a free one locally, 52111 remotely)");
  cmd->add_option("--timeout", o->launch.timeout_s, "Seconds before a silent or dead rank fails the others")
      ->capture_default_str();
  cmd->add_option("--secret-file", o->secret_file,
                  "File holding the cluster secret (or set ORCHARD_SECRET): connections are authenticated");
  cmd->add_option("--ssh", o->launch.ssh, "ssh program for --hostfile")->capture_default_str();
  cmd->add_option("--env", o->launch.extra_env, "NAME=value added to every rank's environment");
  cmd->add_flag("--no-prefix", o->no_prefix, "Do not prefix output lines with [rank]");
  cmd->add_flag("--no-bind", o->no_bind, "Local ranks: do not give each rank its own cores");
  cmd->add_option("command", o->launch.command, "The command every rank runs (after --)")->required();
  cmd->callback([o] {
    dist::Hostfile hf;
    if (!o->hostfile.empty()) {
      hf = dist::load_hostfile(o->hostfile);
      o->launch.hostfile = &hf;
      if (hf.backend && o->launch.backend == "tcp") o->launch.backend = *hf.backend;
      if (o->launch.ranks && o->launch.ranks != static_cast<int>(hf.hosts.size()))
        throw Error("launch: -n " + std::to_string(o->launch.ranks) + " disagrees with the hostfile's " +
                    std::to_string(hf.hosts.size()) + " hosts");
    } else if (o->launch.ranks < 1) {
      throw Error("launch: give -n N (local ranks) or --hostfile FILE");
    }
    o->launch.secret = read_secret(o->secret_file, "launch");
    o->launch.prefix = !o->no_prefix;
    o->launch.bind = !o->no_bind;
    const int rc = dist::launch(o->launch);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace orchard::cli
