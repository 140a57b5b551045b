#include "protocol/node_info.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "parallel/catalog.h"
#include "tensor/error.h"
#include "tensor/types.h"

namespace orchard::protocol {
namespace {

using nlohmann::json;

// Where a value sits, for messages: "node 'studio-pair': machines[1].memory_bytes".
// Unknown keys are ignored, so a newer node that sends more fields still registers.
struct At {
  std::string node;  // "node 'x'", or "node" before the id is known
  std::string path;
  At operator/(std::string_view key) const { return {node, path.empty() ? std::string(key) : path + "." + std::string(key)}; }
  At operator[](size_t i) const { return {node, path + "[" + std::to_string(i) + "]"}; }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(node + (path.empty() ? "" : ": " + path) + ": " + what);
  }
};

const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& object(const json& j, const At& at) {
  if (!j.is_object()) at.fail("expected a JSON object");
  return j;
}

const json& array(const json& obj, const char* key, const At& at) {
  const json* v = member(obj, key);
  if (!v) (at / key).fail("missing (expected an array)");
  if (!v->is_array()) (at / key).fail("expected an array");
  return *v;
}

std::string text(const json& obj, const char* key, const At& at, std::optional<std::string> fallback = std::nullopt) {
  const json* v = member(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    (at / key).fail("missing (expected a string)");
  }
  if (!v->is_string() || v->get_ref<const std::string&>().empty()) (at / key).fail("expected a non-empty string");
  return v->get<std::string>();
}

// An integer in [lo, hi]; `fallback` when absent (required when there is none).
int64_t integer(const json& obj, const char* key, const At& at, int64_t lo, int64_t hi,
                std::optional<int64_t> fallback = std::nullopt) {
  const json* v = member(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    (at / key).fail("missing (expected an integer)");
  }
  const std::string range = lo == 1 && hi == INT64_MAX ? "a positive integer"
                                                       : "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!v->is_number_integer()) (at / key).fail("expected " + range);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) (at / key).fail("expected " + range);
  const auto x = v->get<int64_t>();
  if (x < lo || x > hi) (at / key).fail("expected " + range + ", got " + std::to_string(x));
  return x;
}

std::string shortest(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

double number(const json& obj, const char* key, const At& at, double lo, double hi, std::optional<double> fallback) {
  const json* v = member(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    (at / key).fail("missing (expected a number)");
  }
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < lo || v->get<double>() > hi)
    (at / key).fail("expected a number in [" + shortest(lo) + ", " + shortest(hi) + "]");
  return v->get<double>();
}

template <class E>
E choice(const json& obj, const char* key, const At& at, E fallback, std::initializer_list<std::pair<const char*, E>> names) {
  const json* v = member(obj, key);
  if (!v) return fallback;
  std::string accepted;
  for (const auto& [name, value] : names) {
    if (v->is_string() && v->get_ref<const std::string&>() == name) return value;
    accepted += std::string(accepted.empty() ? "" : ", ") + "'" + name + "'";
  }
  (at / key).fail("expected one of " + accepted + ", got " + v->dump());
}

const std::initializer_list<std::pair<const char*, Lending>> kLending = {{"dedicated", Lending::Dedicated},
                                                                         {"when-idle", Lending::WhenIdle}};
const std::initializer_list<std::pair<const char*, NodeStatus>> kStatus = {
    {"available", NodeStatus::Available}, {"busy", NodeStatus::Busy}, {"draining", NodeStatus::Draining}};

MachineInfo machine_from_json(const json& j, const At& at) {
  object(j, at);
  MachineInfo m;
  m.name = text(j, "name", at);
  m.chip = text(j, "chip", at, "");
  m.memory_bytes = static_cast<uint64_t>(integer(j, "memory_bytes", at, 1, INT64_MAX));
  m.mem_bw_gbs = number(j, "mem_bw_gbs", at, 0.001, 1e6, std::nullopt);
  m.cores = static_cast<int>(integer(j, "cores", at, 1, 65536));
  m.tflops = number(j, "tflops", at, 0, 1e6, 0.0);
  return m;
}

bool catalog_has_link(const std::string& id) {
  const auto& links = parallel::Catalog::builtin().links();
  return std::any_of(links.begin(), links.end(), [&](const parallel::LinkSpec& l) { return l.id == id; });
}

CabledGroup group_from_json(const json& j, const At& at, const std::vector<MachineInfo>& machines) {
  object(j, at);
  CabledGroup g;
  const json& members = array(j, "members", at);
  for (size_t i = 0; i < members.size(); ++i) {
    if (!members[i].is_string()) (at / "members")[i].fail("expected a machine name");
    g.members.push_back(members[i].get<std::string>());
  }
  // The group is the node: every machine belongs to it exactly once, and nothing else does.
  std::set<std::string> named(g.members.begin(), g.members.end()), have;
  for (const MachineInfo& m : machines) have.insert(m.name);
  if (named.size() != g.members.size()) (at / "members").fail("names a machine twice");
  if (named != have) (at / "members").fail("must name exactly the node's machines");
  g.link = text(j, "link", at);
  // Measured figures win; a link the catalog knows may leave them out (placement fills them in).
  const bool known = catalog_has_link(g.link);
  const std::optional<double> unmeasured = known ? std::optional<double>(0.0) : std::nullopt;
  g.latency_us = number(j, "latency_us", at, 0, 1e7, unmeasured);
  g.gbs = number(j, "gbs", at, known ? 0 : 1e-6, 1e5, unmeasured);
  return g;
}

}  // namespace

bool is_sha256_hex(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

namespace {

ModelInfo model_from_json(const json& j, const At& at) {
  object(j, at);
  ModelInfo m;
  m.name = text(j, "name", at);
  m.file_bytes = static_cast<uint64_t>(integer(j, "file_bytes", at, 0, INT64_MAX, 0));
  m.sha256 = text(j, "sha256", at, std::string());
  if (!m.sha256.empty() && !is_sha256_hex(m.sha256)) (at / "sha256").fail("expected 64 lowercase hex digits");
  const std::string type_text = text(j, "type", at);
  DType type{};
  try {
    type = parse_type(type_text);
  } catch (const Error&) {
    (at / "type").fail("'" + type_text + "' is not a weight format (\"q4_0\", \"q8_0\", \"f16\", …)");
  }
  const json* shape = member(j, "shape");
  const json* spec = member(j, "spec");
  if ((shape != nullptr) == (spec != nullptr)) at.fail("expected exactly one of 'shape' (the numbers) or 'spec' (a known shape)");
  if (spec) {
    m.spec = text(j, "spec", at);
    try {
      m.shape = parallel::model_spec(m.spec, type);
    } catch (const Error& e) {
      (at / "spec").fail(e.what());
    }
    m.shape.name = m.name;
    return m;
  }
  const At s = at / "shape";
  object(*shape, s);
  parallel::ModelSpec p;
  p.name = m.name;
  p.type = type;
  constexpr int64_t kBig = int64_t{1} << 32;
  p.n_layers = integer(*shape, "layers", s, 1, 100'000);
  p.dim = integer(*shape, "dim", s, 1, kBig);
  p.n_heads = integer(*shape, "heads", s, 1, kBig);
  p.n_kv_heads = integer(*shape, "kv_heads", s, 1, p.n_heads, p.n_heads);
  p.head_dim = integer(*shape, "head_dim", s, 1, kBig, std::max<int64_t>(1, p.dim / p.n_heads));
  p.n_vocab = integer(*shape, "vocab", s, 1, kBig);
  p.n_experts = integer(*shape, "experts", s, 0, 1 << 20, 0);
  p.ffn_dim = integer(*shape, "ffn_dim", s, p.n_experts > 0 ? 0 : 1, kBig, p.n_experts > 0 ? std::optional<int64_t>(0) : std::nullopt);
  if (p.n_experts > 0) {
    p.n_experts_used = integer(*shape, "experts_used", s, 1, p.n_experts);
    p.expert_ffn_dim = integer(*shape, "expert_ffn_dim", s, 1, kBig);
    p.n_shared_experts = integer(*shape, "shared_experts", s, 0, p.n_experts, 0);
    p.n_dense_layers = integer(*shape, "dense_layers", s, 0, p.n_layers, 0);
  }
  p.tied_embeddings = shape->value("tied_embeddings", false);
  m.shape = p;
  return m;
}

json model_to_json(const ModelInfo& m) {
  json j = {{"name", m.name}, {"file_bytes", m.file_bytes}};
  if (!m.sha256.empty()) j["sha256"] = m.sha256;
  const parallel::ModelSpec& p = m.shape;
  j["type"] = type_name(p.type);
  if (!m.spec.empty()) {
    j["spec"] = m.spec;
    return j;
  }
  json s = {{"layers", p.n_layers}, {"dim", p.dim},         {"heads", p.n_heads}, {"kv_heads", p.n_kv_heads},
            {"head_dim", p.head_dim}, {"ffn_dim", p.ffn_dim}, {"vocab", p.n_vocab}, {"tied_embeddings", p.tied_embeddings}};
  if (p.n_experts > 0) {
    s["experts"] = p.n_experts;
    s["experts_used"] = p.n_experts_used;
    s["expert_ffn_dim"] = p.expert_ffn_dim;
    s["shared_experts"] = p.n_shared_experts;
    s["dense_layers"] = p.n_dense_layers;
  }
  j["shape"] = s;
  return j;
}

HeartbeatState heartbeat_at(const json& j, const At& at) {
  object(j, at);
  HeartbeatState h;
  h.load = number(j, "load", at, 0, 1, 0.0);
  h.status = choice(j, "status", at, NodeStatus::Available, kStatus);
  if (member(j, "running")) {
    const json& running = array(j, "running", at);
    h.running.emplace();
    for (size_t i = 0; i < running.size(); ++i) {
      if (!running[i].is_string()) (at / "running")[i].fail("expected a job id");
      h.running->push_back(running[i].get<std::string>());
    }
  }
  return h;
}

}  // namespace

const ModelInfo* NodeInfo::find_model(std::string_view name) const {
  for (const ModelInfo& m : models)
    if (m.name == name) return &m;
  return nullptr;
}

const char* to_string(Lending l) { return l == Lending::Dedicated ? "dedicated" : "when-idle"; }

const char* to_string(NodeStatus s) {
  switch (s) {
    case NodeStatus::Available: return "available";
    case NodeStatus::Busy: return "busy";
    case NodeStatus::Draining: return "draining";
  }
  return "?";
}

NodeInfo node_info_from_json(const json& j) {
  At at{"node", ""};
  object(j, at);
  NodeInfo n;
  n.id = text(j, "id", at);
  at.node = "node '" + n.id + "'";
  n.owner = text(j, "owner", at);
  // Unstated hardware prices as the lowest class: a node is never paid more than it claimed.
  try {
    n.hardware = parse_hardware_class(text(j, "hardware", at, "laptop"));
  } catch (const Error& e) {
    (at / "hardware").fail(e.what());
  }
  const json& machines = array(j, "machines", at);
  if (machines.empty()) (at / "machines").fail("expected at least one machine");
  std::set<std::string> names;
  for (size_t i = 0; i < machines.size(); ++i) {
    n.machines.push_back(machine_from_json(machines[i], (at / "machines")[i]));
    if (!names.insert(n.machines.back().name).second)
      ((at / "machines")[i] / "name").fail("'" + n.machines.back().name + "' names two machines");
  }
  if (const json* g = member(j, "group")) n.group = group_from_json(*g, at / "group", n.machines);
  else if (n.machines.size() > 1)
    (at / "group").fail("missing: several machines form one node only as a cabled group (members, link, latency, bandwidth)");
  const json& models = array(j, "models", at);
  std::set<std::string> model_names;
  for (size_t i = 0; i < models.size(); ++i) {
    n.models.push_back(model_from_json(models[i], (at / "models")[i]));
    if (!model_names.insert(n.models.back().name).second)
      ((at / "models")[i] / "name").fail("'" + n.models.back().name + "' is listed twice");
  }
  n.max_context = integer(j, "max_context", at, 1, INT64_MAX);
  n.max_jobs = static_cast<int>(integer(j, "max_jobs", at, 1, 1024, 1));
  n.lending = choice(j, "lending", at, Lending::WhenIdle, kLending);
  n.state = heartbeat_at(j, at);
  if (const json* r = member(j, "region")) {
    const At where = at / "region";
    const json& o = object(*r, where);
    const Region given{text(o, "name", where), number(o, "lat", where, -90, 90, std::nullopt),
                       number(o, "lon", where, -180, 180, std::nullopt)};
    try {
      n.region = checked_region(given);
    } catch (const Error& e) {
      where.fail(e.what());
    }
  }
  return n;
}

json to_json(const ModelInfo& m) { return model_to_json(m); }

ModelInfo model_info_from_json(const json& j) { return model_from_json(j, At{"model description", ""}); }

NodeInfo parse_node_info(std::string_view json_text) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(std::string("node description is not valid JSON: ") + e.what());
  }
  return node_info_from_json(j);
}

json to_json(const NodeInfo& n) {
  json machines = json::array();
  for (const MachineInfo& m : n.machines)
    machines.push_back({{"name", m.name}, {"chip", m.chip}, {"memory_bytes", m.memory_bytes},
                        {"mem_bw_gbs", m.mem_bw_gbs}, {"cores", m.cores}, {"tflops", m.tflops}});
  json models = json::array();
  for (const ModelInfo& m : n.models) models.push_back(model_to_json(m));
  json j = to_json(n.state);
  j.update({{"id", n.id},
            {"owner", n.owner},
            {"hardware", to_string(n.hardware)},
            {"machines", machines},
            {"models", models},
            {"max_context", n.max_context},
            {"max_jobs", n.max_jobs},
            {"lending", to_string(n.lending)}});
  if (n.region) j["region"] = {{"name", n.region->name}, {"lat", n.region->lat}, {"lon", n.region->lon}};
  if (n.group)
    j["group"] = {{"members", n.group->members}, {"link", n.group->link}, {"latency_us", n.group->latency_us},
                  {"gbs", n.group->gbs}};
  return j;
}

HeartbeatState heartbeat_from_json(const json& j) { return heartbeat_at(j, At{"heartbeat", ""}); }

json to_json(const HeartbeatState& h) {
  json j = {{"load", h.load}, {"status", to_string(h.status)}};
  if (h.running) j["running"] = *h.running;
  return j;
}

}  // namespace orchard::protocol
