#include "parallel/cluster.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tensor/error.h"

namespace orchard::parallel {

using nlohmann::json;

int NodeSpec::threads_per_rank() const {
  if (threads > 0) return threads;
  return machine.cores > 0 ? std::max(1, machine.cores / std::max(1, ranks)) : 1;
}

NodeSpec catalog_node(const Catalog& catalog, const std::string& spec) {
  const size_t colon = spec.find(':');
  NodeSpec n;
  n.machine = catalog.machine(spec.substr(0, colon));
  n.name = n.machine.id;
  const auto& sizes = n.machine.memory_gib;
  n.memory_gib = *std::max_element(sizes.begin(), sizes.end());
  if (colon != std::string::npos) {
    try {
      n.memory_gib = std::stod(spec.substr(colon + 1));
    } catch (const std::exception&) {
      throw Error("'" + spec + "': memory after ':' must be a number of GiB");
    }
    if (n.memory_gib <= 0) throw Error("'" + spec + "': memory must be positive");
  }
  return n;
}

namespace {

json read_json_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(path + ": cannot open (not a regular file)");
  if (std::filesystem::file_size(path, ec) > (size_t{16} << 20)) throw Error(path + ": too large for a node file");
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    throw Error(path + ": not valid JSON: " + e.what());
  }
}

}  // namespace

NodeSpec measured_node(const std::string& path) {
  NodeSpec n;
  n.machine = machine_from_json(read_json_file(path), path);
  n.name = n.machine.id.empty() ? "node" : n.machine.id;
  n.memory_gib = n.machine.memory_gib.back();
  return n;
}

namespace {

// A whole-number field within [lo, hi]: json's own conversion of 1e300 to int is undefined
// behaviour (found by cluster_fuzz).
int count_field(const json& e, const char* key, int fallback, int lo, int hi) {
  if (!e.contains(key)) return fallback;
  const json& v = e[key];
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) ||
      v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    throw Error(std::string("cluster file: \"") + key + "\" must be a whole number from " + std::to_string(lo) +
                " to " + std::to_string(hi) + " (got " + v.dump() + ")");
  return static_cast<int>(v.get<int64_t>());
}

}  // namespace

ClusterSpec ClusterSpec::parse(const std::string& text, const std::string& base_dir, const Catalog& catalog) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string("cluster file: not valid JSON: ") + e.what());
  }
  ClusterSpec c;
  try {
    if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array() || j["nodes"].empty())
      throw Error("cluster file: needs a non-empty \"nodes\" list");
    c.name = j.value("name", "cluster");
    c.price_kwh = j.value("price_kwh", c.price_kwh);
    for (const json& e : j["nodes"]) {
      NodeSpec n;
      if (e.contains("file")) {
        std::string path = e["file"].get<std::string>();
        if (!path.empty() && path[0] != '/' && !base_dir.empty()) path = base_dir + "/" + path;
        n = measured_node(path);
      } else if (e.contains("machine") && e["machine"].is_object()) {
        n.machine = machine_from_json(e["machine"], "cluster node");
        n.memory_gib = n.machine.memory_gib.back();
      } else if (e.contains("machine")) {
        n = catalog_node(catalog, e["machine"].get<std::string>());
      } else {
        throw Error("cluster file: each node needs \"machine\" (a catalog id or an object) or \"file\"");
      }
      n.memory_gib = e.value("memory_gib", n.memory_gib);
      n.ranks = count_field(e, "ranks", 1, 0, 1 << 16);
      n.threads = count_field(e, "threads", 0, 0, 1 << 16);
      if (n.ranks < 1 || n.ranks > 4096 || n.threads < 0 || n.threads > 65536 || !(n.memory_gib > 0))
        throw Error("cluster file: node '" + n.name + "' needs ranks >= 1, threads >= 0 and memory > 0");
      const std::string base = e.value("name", n.name);
      const int count = count_field(e, "count", 1, 0, 1 << 16);
      if (count < 1 || count > 4096) throw Error("cluster file: node '" + base + "' count must lie in 1..4096");
      n.name = base;
      for (int i = 0; i < count; ++i) c.nodes.push_back(n);
    }
    // Names must tell machines apart in the memory report: number repeated ones in order.
    std::map<std::string, int> seen, next;
    for (const NodeSpec& n : c.nodes) ++seen[n.name];
    for (NodeSpec& n : c.nodes)
      if (seen[n.name] > 1) n.name += "-" + std::to_string(++next[n.name]);
    if (j.contains("link")) {
      const json& l = j["link"];
      if (l.contains("type")) c.link.spec = catalog.link(l["type"].get<std::string>());
      c.link.spec.latency_us = l.value("latency_us", c.link.spec.latency_us);
      c.link.spec.gbs = l.value("gbs", c.link.spec.gbs);
      if (l.contains("latency_us") && !l.contains("type")) c.link.spec.id = c.link.spec.name = "custom";
      c.link.cables = count_field(l, "cables", 1, 0, 64);
      if (c.link.spec.latency_us < 0 || c.link.cables < 1 || c.link.cables > 64)
        throw Error("cluster file: the link needs latency_us >= 0 and 1..64 cables");
    } else if (c.nodes.size() > 1) {
      throw Error("cluster file: several machines need a \"link\" (e.g. {\"type\": \"tb5-rdma\"})");
    }
    if (c.nodes.size() > 1 && c.link.spec.gbs <= 0) throw Error("cluster file: the link needs gbs > 0");
    if (j.contains("local")) {
      c.local_backend = j["local"].value("backend", c.local_backend);
      c.local_extra_latency_us = j["local"].value("extra_latency_us", 0.0);
    }
    if (!(c.price_kwh >= 0) || !std::isfinite(c.price_kwh))
      throw Error("cluster file: price_kwh must be a finite, non-negative price");
    // Named as an integer in the calibration tables ("tcp+50"), so it must fit one; a second is
    // already far beyond any link worth emulating.
    if (!(c.local_extra_latency_us >= 0 && c.local_extra_latency_us <= 1e6))
      throw Error("cluster file: local.extra_latency_us must lie in 0..1000000");
  } catch (const json::exception& e) {
    throw Error(std::string("cluster file: ") + e.what());
  }
  return c;
}

ClusterSpec ClusterSpec::load(const std::string& path, const Catalog& catalog) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  const size_t slash = path.rfind('/');
  try {
    return parse(ss.str(), slash == std::string::npos ? "." : path.substr(0, slash), catalog);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

int ClusterSpec::total_ranks() const {
  int n = 0;
  for (const NodeSpec& node : nodes) n += node.ranks;
  return n;
}

std::string ClusterSpec::describe() const {
  std::string s;
  for (size_t i = 0; i < nodes.size(); ++i) {
    // Runs of identical machines print once with a count.
    size_t j = i;
    while (j + 1 < nodes.size() && nodes[j + 1].machine.id == nodes[i].machine.id &&
           nodes[j + 1].memory_gib == nodes[i].memory_gib && nodes[j + 1].ranks == nodes[i].ranks)
      ++j;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%zu × %s %.0f GiB%s", s.empty() ? "" : " + ", j - i + 1, nodes[i].machine.name.c_str(),
                  nodes[i].memory_gib,
                  nodes[i].ranks > 1 ? (" (" + std::to_string(nodes[i].ranks) + " ranks)").c_str() : "");
    s += buf;
    i = j;
  }
  if (nodes.size() > 1) s += ", linked by " + link.spec.name + (link.cables > 1 ? " ×" + std::to_string(link.cables) : "");
  if (total_ranks() > static_cast<int>(nodes.size()))
    s += ", ranks on one machine over " + local_backend +
         (local_extra_latency_us > 0 ? " +" + std::to_string(static_cast<int>(local_extra_latency_us)) + " µs" : "");
  return s;
}

}  // namespace orchard::parallel
