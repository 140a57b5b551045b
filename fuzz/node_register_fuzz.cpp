// What a stranger's node sends the coordinator: any bytes as a registration must become a
// NodeInfo that placement can weigh against a job (every model it offers, its context, its
// machines and cable through the planner) or an orchard::Error, nothing else. The same bytes
// also go through the readers a node applies to the coordinator's replies, and the audit
// reports auditors send (protocol/audit.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network/protocol_names.h"
#include "network/placement.h"
#include "protocol/memory_proof.h"
#include "tensor/error.h"

namespace {

template <class F>
void refused_or_read(F f) {
  try {
    f();
  } catch (const orchard::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orchard::network;
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  refused_or_read([&] {
    const NodeInfo n = node_info_from_json(j);
    // Bounded so one input stays fast: a real registration lists a handful of each.
    if (n.machines.size() > 16 || n.models.size() > 8) return;
    std::vector<NodeView> nodes(1);
    nodes[0].info = n;
    nodes[0].last_heartbeat_ms = 1000;
    PlacementOptions o;
    o.now_ms = 2000;
    for (const ModelInfo& m : n.models) {
      JobDemand job;
      job.model = m.name;
      job.n_ctx = n.max_context > 0 && n.max_context < (int64_t{1} << 24) ? n.max_context : 4096;
      const PlacementResult r = place(job, nodes, o);
      if (!r.choice) (void)r.why_not(job);
    }
  });
  refused_or_read([&] { (void)heartbeat_from_json(j); });
  refused_or_read([&] { (void)work_from_json(j); });
  refused_or_read([&] { (void)chunk_from_json(j); });
  refused_or_read([&] { (void)register_reply_from_json(j); });
  refused_or_read([&] { (void)entry_from_json(j); });
  refused_or_read([&] { (void)signed_head_from_json(j); });
  // What an auditor sends back, judged as the coordinator judges it, and what an auditor is sent.
  refused_or_read([&] {
    const AuditReport r = audit_report_from_json(j);
    (void)judge(r, r.positions.size());
    (void)judge(r, r.positions.size() + 1);
  });
  refused_or_read([&] { (void)audit_request_from_json(j); });
  // A memory check's opening (protocol/memory_proof.h), checked against a small challenge with
  // its own seed and root and the probes its first openings name, so the checks past the seed
  // and root are reached; the probe lists and roots a node gets back and sends.
  refused_or_read([&] { (void)orchard::protocol::memory_challenge_from_json(j); });
  refused_or_read([&] { (void)orchard::protocol::probes_from_json(j); });
  refused_or_read([&] { (void)orchard::protocol::root_from_hex(j, "root"); });
  refused_or_read([&] {
    const orchard::protocol::MemoryProof p = orchard::protocol::memory_proof_from_json(j);
    orchard::protocol::MemoryChallenge c;
    c.seed = p.seed.size() == 64 ? p.seed : std::string(64, 'a');
    c.blocks = 4;
    c.probes = 1;
    std::vector<uint64_t> probes;
    for (size_t k = 0; k < p.openings.size(); k += 3) probes.push_back(p.openings[k].index);
    (void)orchard::protocol::check_memory_proof(c, p.root, probes, p);
  });
  return 0;
}
