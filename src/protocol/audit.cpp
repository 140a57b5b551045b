#include "protocol/audit.h"

#include <cmath>
#include <cstdio>

#include "tensor/error.h"

namespace orchard::protocol {

using nlohmann::json;

namespace {

// An audit covers one job's output: max_tokens is at most a context (a few hundred thousand).
constexpr size_t kMaxPositions = 1u << 20;

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::vector<double> numbers(const json& j, const char* field, double lo) {
  const std::string where = std::string("audit report: '") + field + "'";
  if (!j.contains(field) || !j[field].is_array()) throw Error(where + " must be an array of numbers");
  const json& a = j[field];
  if (a.size() > kMaxPositions) throw Error(where + " holds " + std::to_string(a.size()) + " values (too many)");
  std::vector<double> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number()) throw Error(where + "[" + std::to_string(i) + "] is not a number");
    const double v = a[i].get<double>();
    if (!std::isfinite(v) || v < lo)
      throw Error(where + "[" + std::to_string(i) + "] = " + fmt(v) + " is out of range (finite, at least " + fmt(lo) + ")");
    out.push_back(v);
  }
  return out;
}

}  // namespace

const char* to_string(AuditOutcome o) {
  switch (o) {
    case AuditOutcome::Passed: return "passed";
    case AuditOutcome::Failed: return "failed";
    case AuditOutcome::Inconclusive: return "inconclusive";
  }
  return "?";
}

Verdict judge(const AuditReport& r, size_t expected, const AuditRules& rules) {
  Verdict v;
  if (r.positions.size() != expected) {
    v.why = "the auditor scored " + std::to_string(r.positions.size()) + " tokens of " + std::to_string(expected);
    return v;
  }
  if (expected == 0) {
    v.outcome = AuditOutcome::Passed;
    v.why = "no tokens to check";
    return v;
  }
  if (r.greedy) {
    size_t worst = 0;
    for (size_t i = 1; i < r.positions.size(); ++i)
      if (r.positions[i].gap > r.positions[worst].gap) worst = i;
    const double gap = r.positions[worst].gap;
    v.outcome = gap > rules.max_gap ? AuditOutcome::Failed : AuditOutcome::Passed;
    v.why = "greedy: token " + std::to_string(worst) + " of " + std::to_string(expected) + " is " + fmt(gap) +
            " below the best logit (allowed " + fmt(rules.max_gap) + ")";
    return v;
  }
  double s = 0, h = 0, h_half = 0;
  for (const AuditPosition& p : r.positions) s += p.surprisal, h += p.entropy, h_half += p.renyi_half;
  // ln P(honest S ≥ s) ≤ (Σ H½ − s) / 2.
  const double log_bound = (h_half - s) / 2;
  v.outcome = log_bound < std::log(rules.false_alarm) ? AuditOutcome::Failed : AuditOutcome::Passed;
  v.why = "sampled: " + std::to_string(expected) + " tokens of surprisal " + fmt(s) + " nats (an honest draw averages " +
          fmt(h) + "); an honest node gets this far with probability at most e^" + fmt(log_bound) + " (allowed " +
          fmt(rules.false_alarm) + ")";
  return v;
}

Verdict check_canary(const std::vector<int32_t>& expected, const std::vector<double>& margins,
                     const std::vector<int32_t>& returned, const AuditRules& rules) {
  Verdict v;
  if (margins.size() != expected.size()) {
    v.why = "the canary's reference has " + std::to_string(margins.size()) + " margins for " +
            std::to_string(expected.size()) + " tokens";
    return v;
  }
  size_t sure = expected.size();  // the steps before the first close call
  for (size_t i = 0; i < margins.size(); ++i)
    if (margins[i] < 2 * rules.max_gap) {
      sure = i;
      break;
    }
  for (size_t i = 0; i < sure; ++i) {
    if (i >= returned.size()) {
      v.outcome = AuditOutcome::Failed;
      v.why = "canary: the node stopped after " + std::to_string(returned.size()) + " tokens; the reference goes on to " +
              std::to_string(expected.size());
      return v;
    }
    if (returned[i] != expected[i]) {
      v.outcome = AuditOutcome::Failed;
      v.why = "canary: token " + std::to_string(i) + " is " + std::to_string(returned[i]) + ", the reference's " +
              std::to_string(expected[i]) + " led by " + fmt(margins[i]) + " logits";
      return v;
    }
  }
  if (sure == expected.size() && returned.size() > expected.size()) {
    v.outcome = AuditOutcome::Failed;
    v.why = "canary: the node went on past the reference's " + std::to_string(expected.size()) + " tokens";
    return v;
  }
  v.outcome = AuditOutcome::Passed;
  v.why = "canary: " + std::to_string(sure) + " tokens as the reference" +
          (sure < expected.size() ? " (token " + std::to_string(sure) + " is too close to call)" : std::string());
  return v;
}

json to_json(const AuditRequest& r) { return {{"request", r.request}, {"tokens", r.tokens}}; }

AuditRequest audit_request_from_json(const json& j) {
  if (!j.is_object()) throw Error("audit request: not a JSON object");
  if (!j.contains("request") || !j["request"].is_object()) throw Error("audit request: 'request' must be an object");
  if (!j.contains("tokens") || !j["tokens"].is_array()) throw Error("audit request: 'tokens' must be an array of token ids");
  AuditRequest r;
  r.request = j["request"];
  if (j["tokens"].size() > kMaxPositions) throw Error("audit request: too many tokens");
  for (const json& t : j["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
      throw Error("audit request: 'tokens' holds something other than a token id: " + t.dump());
    r.tokens.push_back(t.get<int32_t>());
  }
  return r;
}

json to_json(const AuditReport& r) {
  json gap = json::array(), surprisal = json::array(), entropy = json::array(), renyi = json::array();
  for (const AuditPosition& p : r.positions) {
    gap.push_back(p.gap);
    surprisal.push_back(p.surprisal);
    entropy.push_back(p.entropy);
    renyi.push_back(p.renyi_half);
  }
  return {{"greedy", r.greedy}, {"gap", gap}, {"surprisal", surprisal}, {"entropy", entropy}, {"renyi_half", renyi}};
}

AuditReport audit_report_from_json(const json& j) {
  if (!j.is_object()) throw Error("audit report: not a JSON object");
  if (!j.contains("greedy") || !j["greedy"].is_boolean()) throw Error("audit report: 'greedy' must be true or false");
  const auto gap = numbers(j, "gap", 0), surprisal = numbers(j, "surprisal", 0), entropy = numbers(j, "entropy", 0),
             renyi = numbers(j, "renyi_half", 0);
  if (surprisal.size() != gap.size() || entropy.size() != gap.size() || renyi.size() != gap.size())
    throw Error("audit report: 'gap', 'surprisal', 'entropy' and 'renyi_half' differ in length");
  AuditReport r;
  r.greedy = j["greedy"].get<bool>();
  for (size_t i = 0; i < gap.size(); ++i) r.positions.push_back({gap[i], surprisal[i], entropy[i], renyi[i]});
  return r;
}

}  // namespace orchard::protocol
