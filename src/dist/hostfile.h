#pragma once
// Hostfiles in the shape mlx.launch uses, so people can reuse theirs:
//   {"hosts": [{"ssh": "mac1.local", "ips": ["10.0.0.1"], "rdma": [null, "rdma_en3"]}, ...]}
// or the bare list [{"ssh": ..., "ips": [...]}, ...]. One rank per host, in order.
#include <optional>
#include <string>
#include <vector>

namespace orchard::dist {

struct HostEntry {
  std::string ssh;                // how to reach it with ssh
  std::vector<std::string> ips;   // addresses the ranks use to talk (first one wins)
  std::vector<std::string> rdma;  // RDMA device per peer ("" where none)
  // The address peers should use for this host.
  const std::string& address() const { return ips.empty() ? ssh : ips.front(); }
};

struct Hostfile {
  std::vector<HostEntry> hosts;
  std::optional<std::string> backend;
};

// Parses JSON text; throws orchard::Error naming the file and what is wrong.
Hostfile parse_hostfile(const std::string& text, const std::string& path);
Hostfile load_hostfile(const std::string& path);

}  // namespace orchard::dist
