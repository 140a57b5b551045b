// The audit rules (protocol/audit.h) on reports built by hand: the greedy tolerance, the
// sampled bound at its edge, reports that do not cover the job, and the report parser's
// refusals. The same rules on the real engine's output: tests/node/audit_runner_test.cpp.
#include "protocol/audit.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tensor/error.h"

namespace orchard::protocol {
namespace {

using nlohmann::json;

AuditReport greedy(std::initializer_list<double> gaps) {
  AuditReport r;
  r.greedy = true;
  for (double g : gaps) r.positions.push_back({g, 1, 1, 1.5});
  return r;
}

TEST(AuditRules, GreedyTokensMayBeRoundingAwayFromTheArgmaxButNoMore) {
  EXPECT_EQ(judge(greedy({0, 0, 0}), 3).outcome, AuditOutcome::Passed);
  EXPECT_EQ(judge(greedy({0, 1e-4, 0.049}), 3).outcome, AuditOutcome::Passed);
  const Verdict v = judge(greedy({0, 0.3, 0.06}), 3);
  EXPECT_EQ(v.outcome, AuditOutcome::Failed);
  EXPECT_NE(v.why.find("token 1 of 3 is 0.3 below"), std::string::npos) << v.why;
  AuditRules loose;
  loose.max_gap = 0.5;
  EXPECT_EQ(judge(greedy({0, 0.3}), 2, loose).outcome, AuditOutcome::Passed);
}

TEST(AuditRules, AReportThatDoesNotCoverTheJobIsNoVerdict) {
  const Verdict v = judge(greedy({5, 5}), 3);
  EXPECT_EQ(v.outcome, AuditOutcome::Inconclusive);
  EXPECT_NE(v.why.find("2 tokens of 3"), std::string::npos) << v.why;
  EXPECT_EQ(judge(AuditReport{}, 0).outcome, AuditOutcome::Passed);
}

// Sampled: flagged exactly when e^((Σ H½ − Σ s) / 2) drops below the false-alarm rate.
TEST(AuditRules, SampledOutputIsFlaggedWhereTheHonestBoundEnds) {
  AuditRules rules;
  rules.false_alarm = 1e-9;
  const double limit = -2 * std::log(rules.false_alarm);  // Σ s − Σ H½ allowed: 41.4 nats
  auto report = [](int n, double s, double h_half) {
    AuditReport r;
    for (int i = 0; i < n; ++i) r.positions.push_back({0, s, h_half * 0.8, h_half});
    return r;
  };
  EXPECT_EQ(judge(report(10, 2.0, 2.0), 10, rules).outcome, AuditOutcome::Passed);
  EXPECT_EQ(judge(report(10, 2.0 + (limit - 0.5) / 10, 2.0), 10, rules).outcome, AuditOutcome::Passed);
  const Verdict v = judge(report(10, 2.0 + (limit + 0.5) / 10, 2.0), 10, rules);
  EXPECT_EQ(v.outcome, AuditOutcome::Failed);
  EXPECT_NE(v.why.find("sampled: 10 tokens"), std::string::npos) << v.why;
  // Uniform random tokens over a 32k vocabulary from a model sure of itself: caught in a few tokens.
  EXPECT_EQ(judge(report(8, std::log(32000.0), 1.0), 8, rules).outcome, AuditOutcome::Failed);
}

TEST(AuditRules, ReportsAndRequestsRoundTripAndBadOnesAreRefusedByField) {
  AuditReport r = greedy({0, 0.25});
  r.positions[1].surprisal = 3.5;
  const AuditReport back = audit_report_from_json(json::parse(to_json(r).dump()));
  ASSERT_EQ(back.positions.size(), 2u);
  EXPECT_TRUE(back.greedy);
  EXPECT_EQ(back.positions[1].gap, 0.25);
  EXPECT_EQ(back.positions[1].surprisal, 3.5);
  auto refusal = [](const json& j) {
    try {
      audit_report_from_json(j);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  json ok = to_json(r);
  EXPECT_NE(refusal(json::array()).find("not a JSON object"), std::string::npos);
  json j = ok;
  j.erase("greedy");
  EXPECT_NE(refusal(j).find("'greedy'"), std::string::npos);
  j = ok;
  j["gap"][1] = -1;
  EXPECT_NE(refusal(j).find("'gap'[1]"), std::string::npos);
  j = ok;
  j["surprisal"][0] = "x";
  EXPECT_NE(refusal(j).find("'surprisal'[0] is not a number"), std::string::npos);
  j = ok;
  j["entropy"].push_back(1);
  EXPECT_NE(refusal(j).find("differ in length"), std::string::npos);
  j = ok;
  j.erase("renyi_half");
  EXPECT_NE(refusal(j).find("'renyi_half'"), std::string::npos);

  const AuditRequest q{{{"api", "chat"}, {"body", {{"messages", json::array()}}}}, {1, 2, 3}};
  const AuditRequest q2 = audit_request_from_json(json::parse(to_json(q).dump()));
  EXPECT_EQ(q2.tokens, q.tokens);
  EXPECT_EQ(q2.request, q.request);
  EXPECT_THROW(audit_request_from_json({{"request", "x"}, {"tokens", {1}}}), Error);
  EXPECT_THROW(audit_request_from_json({{"request", json::object()}, {"tokens", {1.5}}}), Error);
}


// A canary's answer is compared token by token up to its first close call (a margin below
// twice max_gap), and no further.
TEST(AuditRules, CanariesMatchTheReferenceUpToItsFirstCloseCall) {
  const std::vector<int32_t> ref = {5, 6, 7, 8};
  const std::vector<double> sure = {2, 1.5, 0.5, 3}, close_at_2 = {2, 1.5, 0.05, 3};
  EXPECT_EQ(check_canary(ref, sure, ref).outcome, AuditOutcome::Passed);
  Verdict v = check_canary(ref, sure, {5, 6, 9, 8});
  EXPECT_EQ(v.outcome, AuditOutcome::Failed);
  EXPECT_NE(v.why.find("token 2 is 9, the reference's 7"), std::string::npos) << v.why;
  // Past a close call anything goes: another CPU may take the other branch there.
  v = check_canary(ref, close_at_2, {5, 6, 9, 1, 1, 1});
  EXPECT_EQ(v.outcome, AuditOutcome::Passed) << v.why;
  EXPECT_NE(v.why.find("token 2 is too close to call"), std::string::npos) << v.why;
  EXPECT_EQ(check_canary(ref, close_at_2, {5, 7}).outcome, AuditOutcome::Failed);
  // Fewer tokens, or more, than a reference with no close call.
  v = check_canary(ref, sure, {5, 6});
  EXPECT_EQ(v.outcome, AuditOutcome::Failed);
  EXPECT_NE(v.why.find("stopped after 2 tokens"), std::string::npos) << v.why;
  EXPECT_EQ(check_canary(ref, sure, {5, 6, 7, 8, 9}).outcome, AuditOutcome::Failed);
  EXPECT_EQ(check_canary(ref, {1, 2}, ref).outcome, AuditOutcome::Inconclusive);
}

}  // namespace
}  // namespace orchard::protocol
