#pragma once
// Auditing a node's output (docs/verification.md): another node, holding the same model file,
// feeds the audited job's prompt and returned tokens through its model and reports how each
// token looks to the sampler that should have chosen it; the coordinator judges the report.
//
// Greedy requests: every returned token must be the argmax of the registered model, up to a
// logit tolerance that absorbs different CPUs' rounding (max_gap). Sampled requests: the
// returned tokens' total surprisal S is compared with the bound an honest draw obeys whatever
// the distributions: for independent honest draws, P(S ≥ s) ≤ exp((Σ H½ − s) / 2), H½ each
// position's Rényi entropy of order ½ (Chernoff with λ = ½: E[p^−½] = Σ √p). The audit fails
// when that bound is below `false_alarm`. Sampling from a top-k / top-p / min-p cut of the same
// distribution only lowers the surprisal, so the bound holds for those too.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace orchard::protocol {

// The `api` of an audit job's request ({"api": "audit", "body": AuditRequest}).
inline constexpr const char* kAuditApi = "audit";

// What the auditor is asked to score: the audited job's request as the coordinator stores it
// ({"api", "body"}) and the token ids the audited node returned, in order.
struct AuditRequest {
  nlohmann::json request;
  std::vector<int32_t> tokens;
};

// One returned token as the auditor's model sees it (model/sampler.h, TokenScore).
struct AuditPosition {
  double gap = 0, surprisal = 0, entropy = 0, renyi_half = 0;
};

struct AuditReport {
  bool greedy = false;  // the request asked for greedy decoding (temperature ≤ 0)
  std::vector<AuditPosition> positions;
};

struct AuditRules {
  // Greedy: how far (in logits) below the best a returned token may be. Rounding differences
  // between CPUs and kernels move logits by about 1e-4; another quantization by 0.1 and more.
  double max_gap = 0.05;
  // Sampled: the most an honest node may be wrongly flagged by one audit.
  double false_alarm = 1e-9;
};

enum class AuditOutcome { Passed, Failed, Inconclusive };
const char* to_string(AuditOutcome o);

struct Verdict {
  AuditOutcome outcome = AuditOutcome::Inconclusive;
  std::string why;  // what was measured, for the log and the node's ban reason
};

// Judges a report on `expected` returned tokens. Inconclusive (nobody is penalised) when the
// report does not cover exactly those tokens.
Verdict judge(const AuditReport& report, size_t expected, const AuditRules& rules = {});

// A canary: a greedy request whose answer the coordinator's operator computed with the pinned
// file (`orchard network canary add`), mixed into a node's work like any client's job.
// `margins[i]` is how far the best logit led the second at token i: where it is below
// 2 × max_gap the step is too close to call (another CPU may round the other way), and the
// comparison ends there. The node's tokens must equal `expected` up to that point (and, when
// there is none, entirely: the same tokens, no fewer, no more).
Verdict check_canary(const std::vector<int32_t>& expected, const std::vector<double>& margins,
                     const std::vector<int32_t>& returned, const AuditRules& rules = {});

// Each *_from_json throws orchard::Error naming the field that is wrong (reports come from
// other nodes: sizes are bounded, numbers must be finite and in range).
nlohmann::json to_json(const AuditRequest& r);
AuditRequest audit_request_from_json(const nlohmann::json& j);
nlohmann::json to_json(const AuditReport& r);
AuditReport audit_report_from_json(const nlohmann::json& j);

}  // namespace orchard::protocol
