#include "parallel/catalog.h"

#include <nlohmann/json.hpp>

#include "model/json_number.h"
#include "tensor/error.h"

namespace orchard::parallel {

extern const char* const kMachinesJson;
extern const char* const kLinksJson;

using nlohmann::json;

double ByCount::at(int n) const {
  if (at_count.empty()) return 0;
  auto hi = at_count.lower_bound(n);
  if (hi != at_count.end() && hi->first == n) return hi->second;
  if (hi == at_count.begin()) return hi->second * n / hi->first;  // fewer than measured: in proportion
  if (hi == at_count.end()) return std::prev(hi)->second;          // more than measured: saturated
  auto lo = std::prev(hi);
  const double f = static_cast<double>(n - lo->first) / (hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

namespace {

template <class T>
T field(const json& j, const char* key, const std::string& where, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return exact_get<T>(*it);
  } catch (const json::out_of_range&) {
    throw Error(where + ": field '" + key + "' is out of range (" + it->dump() + ")");
  } catch (const json::exception&) {
    throw Error(where + ": field '" + key + "' has the wrong type");
  }
}

// "4" → 4; a count between 1 and 65536 or an orchard::Error.
int count_key(const std::string& k, const std::string& where) {
  int n = 0;
  try {
    size_t used = 0;
    n = std::stoi(k, &used);
    if (used != k.size()) n = 0;
  } catch (const std::exception&) {
    n = 0;
  }
  if (n < 1 || n > 65536) throw Error(where + ": key '" + k + "' is not a count");
  return n;
}

ByCount by_count(const json& j, const std::string& where) {
  ByCount b;
  if (j.is_null()) return b;
  if (!j.is_object()) throw Error(where + ": expected an object of {\"threads\": value}");
  for (const auto& [k, v] : j.items()) {
    const int n = count_key(k, where);
    if (!v.is_number() || v.get<double>() < 0) throw Error(where + ": bad entry '" + k + "'");
    b.at_count[n] = v.get<double>();
  }
  return b;
}

json to_json(const ByCount& b) {
  json j = json::object();
  for (const auto& [n, v] : b.at_count) j[std::to_string(n)] = v;
  return j;
}

}  // namespace

MachineSpec machine_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": a machine must be a JSON object");
  MachineSpec m;
  m.id = field<std::string>(j, "id", where, "");
  const std::string at = m.id.empty() ? where : where + " '" + m.id + "'";
  m.name = field<std::string>(j, "name", at, m.id);
  m.tier = field<std::string>(j, "tier", at, "");
  m.source = field<std::string>(j, "source", at, "");
  m.memory_gib = field<std::vector<double>>(j, "memory_gib", at, {});
  m.mem_bw_gbs = field<double>(j, "mem_bw_gbs", at, 0);
  m.gpu_tflops = field<double>(j, "gpu_tflops", at, 0);
  m.gpu_cores = field<int>(j, "gpu_cores", at, 0);
  m.cpu_cores = field<std::string>(j, "cpu_cores", at, "");
  m.thunderbolt = field<int>(j, "thunderbolt", at, 0);
  m.rdma = field<bool>(j, "rdma", at, false);
  m.idle_w = field<double>(j, "idle_w", at, 0);
  m.load_w = field<double>(j, "load_w", at, 0);
  m.power_of = field<std::string>(j, "power_of", at, "");
  m.gen_efficiency = field<double>(j, "gen_efficiency", at, m.gen_efficiency);
  m.prefill_efficiency = field<double>(j, "prefill_efficiency", at, m.prefill_efficiency);
  m.usable_memory = field<double>(j, "usable_memory", at, m.usable_memory);
  m.layer_overhead_us = field<double>(j, "layer_overhead_us", at, 0);
  m.collective_us = field<double>(j, "collective_us", at, 0);
  m.moe_layer_overhead_us = field<double>(j, "moe_layer_overhead_us", at, 0);
  m.measured = field<bool>(j, "measured", at, false);
  m.cores = field<int>(j, "cores", at, 0);
  if (j.contains("membw_gbs")) m.membw_gbs = by_count(j["membw_gbs"], at + " membw_gbs");
  m.sync_us = by_count(j.value("sync_us", json()), at + " sync_us");
  m.layer_us = by_count(j.value("layer_us", json()), at + " layer_us");
  m.layer_us_dim = field<double>(j, "layer_us_dim", at, 768);
  if (!(m.layer_us_dim > 0)) throw Error(at + ": layer_us_dim must be positive");
  for (const char* key : {"matvec_gbs", "matmul_gflops"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_object()) throw Error(at + ": " + key + " must map formats to rates");
    auto& into = std::string(key) == "matvec_gbs" ? m.matvec_gbs : m.matmul_gflops;
    for (const auto& [type, rates] : j[key].items()) into[parse_type(type)] = by_count(rates, at + " " + key + "." + type);
  }
  if (j.contains("local_allsum")) {
    if (!j["local_allsum"].is_object()) throw Error(at + ": local_allsum must map backends to rank counts");
    for (const auto& [backend, by_ranks] : j["local_allsum"].items()) {
      if (!by_ranks.is_object()) throw Error(at + ": local_allsum." + backend + " must map rank counts to fits");
      for (const auto& [ranks, fit] : by_ranks.items()) {
        LinkFit f;
        f.latency_us = field<double>(fit, "latency_us", at + " local_allsum", 0);
        f.gbs = field<double>(fit, "gbs", at + " local_allsum", 1);
        f.sync_us = field<double>(fit, "sync_us", at + " local_allsum", 0);
        f.hop_us = field<double>(fit, "hop_us", at + " local_allsum", 0);
        if (f.gbs <= 0 || f.latency_us < 0) throw Error(at + ": local_allsum." + backend + " has a bad fit");
        if (f.sync_us < 0 || f.hop_us < 0) throw Error(at + ": local_allsum." + backend + " has a bad fit");
        m.local_allsum[backend][count_key(ranks, at + " local_allsum." + backend)] = f;
      }
    }
  }
  if (m.memory_gib.empty()) throw Error(at + ": needs memory_gib");
  if (!m.measured && m.mem_bw_gbs <= 0) throw Error(at + ": needs mem_bw_gbs (GB/s)");
  if (m.measured && m.matvec_gbs.empty() && m.membw_gbs.empty())
    throw Error(at + ": a measured node needs matvec_gbs or membw_gbs (run orchard plan --calibrate)");
  if (m.usable_memory <= 0 || m.usable_memory > 1) throw Error(at + ": usable_memory must lie in (0, 1]");
  for (double g : m.memory_gib)
    if (!(g > 0)) throw Error(at + ": memory_gib entries must be positive");
  if (m.mem_bw_gbs < 0 || m.gpu_tflops < 0 || m.idle_w < 0 || m.load_w < 0 || m.cores < 0 || m.cores > 65536 ||
      m.gen_efficiency <= 0 || m.prefill_efficiency <= 0 || m.layer_overhead_us < 0 || m.collective_us < 0 || m.moe_layer_overhead_us < 0)
    throw Error(at + ": figures must not be negative (and efficiencies must be positive)");
  return m;
}

json machine_to_json(const MachineSpec& m) {
  json j;
  j["id"] = m.id;
  j["name"] = m.name;
  if (!m.source.empty()) j["source"] = m.source;
  j["memory_gib"] = m.memory_gib;
  j["usable_memory"] = m.usable_memory;
  if (m.layer_overhead_us > 0) j["layer_overhead_us"] = m.layer_overhead_us;
  if (m.collective_us > 0) j["collective_us"] = m.collective_us;
  if (m.moe_layer_overhead_us > 0) j["moe_layer_overhead_us"] = m.moe_layer_overhead_us;
  if (m.mem_bw_gbs > 0) j["mem_bw_gbs"] = m.mem_bw_gbs;
  j["idle_w"] = m.idle_w > 0 ? json(m.idle_w) : json();
  j["load_w"] = m.load_w > 0 ? json(m.load_w) : json();
  if (!m.power_of.empty()) j["power_of"] = m.power_of;
  if (m.measured) {
    j["measured"] = true;
    j["cores"] = m.cores;
    j["membw_gbs"] = to_json(m.membw_gbs);
    j["sync_us"] = to_json(m.sync_us);
    if (!m.layer_us.empty()) {
      j["layer_us"] = to_json(m.layer_us);
      j["layer_us_dim"] = m.layer_us_dim;
    }
    for (const auto& [t, r] : m.matvec_gbs) j["matvec_gbs"][type_name(t)] = to_json(r);
    for (const auto& [t, r] : m.matmul_gflops) j["matmul_gflops"][type_name(t)] = to_json(r);
    for (const auto& [backend, by_ranks] : m.local_allsum)
      for (const auto& [n, f] : by_ranks)
        j["local_allsum"][backend][std::to_string(n)] = {
            {"latency_us", f.latency_us}, {"gbs", f.gbs}, {"sync_us", f.sync_us}, {"hop_us", f.hop_us}};
  }
  return j;
}

Catalog Catalog::parse(const std::string& machines_json, const std::string& links_json) {
  Catalog c;
  json mj, lj;
  try {
    mj = json::parse(machines_json);
    lj = json::parse(links_json);
  } catch (const json::exception& e) {
    throw Error(std::string("catalog: not valid JSON: ") + e.what());
  }
  try {
    c.fill(mj, lj);
  } catch (const json::exception& e) {
    throw Error(std::string("catalog: ") + e.what());
  }
  return c;
}

void Catalog::fill(const json& mj, const json& lj) {
  Catalog& c = *this;
  const json tiers = mj.value("tiers", json::object());
  for (const json& e : mj.at("machines")) {
    json entry = e;
    // A tier gives its efficiencies to every chip in it unless the chip says otherwise.
    if (e.contains("tier") && tiers.contains(e["tier"].get<std::string>()))
      for (const auto& [k, v] : tiers[e["tier"].get<std::string>()].items())
        if (!entry.contains(k)) entry[k] = v;
    c.machines_.push_back(machine_from_json(entry, "machine catalog"));
  }
  for (const json& e : lj.at("links")) {
    LinkSpec l;
    l.id = field<std::string>(e, "id", "link catalog", "");
    l.name = field<std::string>(e, "name", "link catalog", l.id);
    l.latency_us = field<double>(e, "latency_us", "link catalog " + l.id, 0);
    l.gbs = field<double>(e, "gbs", "link catalog " + l.id, 0);
    l.max_cables = field<int>(e, "max_cables", "link catalog " + l.id, 1);
    l.rdma = field<bool>(e, "rdma", "link catalog " + l.id, false);
    if (l.id.empty() || l.gbs <= 0) throw Error("link catalog: entry '" + l.id + "' needs an id and gbs");
    c.links_.push_back(l);
  }
}

const Catalog& Catalog::builtin() {
  static const Catalog c = parse(kMachinesJson, kLinksJson);
  return c;
}

const MachineSpec& Catalog::machine(const std::string& id) const {
  std::string known;
  for (const MachineSpec& m : machines_) {
    if (m.id == id) return m;
    known += (known.empty() ? "" : ", ") + m.id;
  }
  throw Error("unknown machine '" + id + "' (known: " + known + "; or describe one with --calibrate)");
}

const LinkSpec& Catalog::link(const std::string& id) const {
  std::string known;
  for (const LinkSpec& l : links_) {
    if (l.id == id) return l;
    known += (known.empty() ? "" : ", ") + l.id;
  }
  throw Error("unknown link '" + id + "' (known: " + known + ")");
}

}  // namespace orchard::parallel
