// Audits with the real engine (protocol/audit.h, node/audit_runner.h): stories260K's own
// greedy and sampled output passes its audit — whatever the sampling options — while random
// tokens fail, and so does greedy output of the Q4_0 file passed off as the F32 one (the
// smaller-quantization cheat). The rules themselves are unit-tested in tests/network/audit_test.cpp.
#include "node/audit_runner.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "test_data.h"

namespace orchard::node {
namespace {

using nlohmann::json;

constexpr const char* kModel = "models/stories260K.gguf";
constexpr const char* kQ4 = "golden/stories260K.Q4_0.gguf";

protocol::Work completion_work(const std::string& prompt, int max_tokens, const json& sampling) {
  json body = {{"model", "stories260K"}, {"prompt", prompt}, {"max_tokens", max_tokens}};
  body.update(sampling);
  protocol::Work w;
  w.job_id = "job-1";
  w.attempt = 1;
  w.model = "stories260K";
  w.request = {{"api", protocol::kCompletionsApi}, {"body", body}};
  w.max_tokens = max_tokens;
  return w;
}

std::vector<int32_t> generate(ServedModel& m, const protocol::Work& w) {
  const PreparedJob p = prepare_job(w, m);
  std::vector<int32_t> out;
  m.generate(p.tokens, p.options, [&](const std::string&, std::span<const TokenId> t) {
    out.insert(out.end(), t.begin(), t.end());
    return true;
  });
  return out;
}

protocol::Verdict audit(ServedModel& auditor, const protocol::Work& job, const std::vector<int32_t>& tokens,
                        protocol::AuditReport* report_out = nullptr) {
  protocol::Work w = job;
  w.job_id = "audit-1";
  w.request = {{"api", protocol::kAuditApi}, {"body", protocol::to_json(protocol::AuditRequest{job.request, tokens})}};
  const protocol::AuditReport report = run_audit(w, auditor);
  if (report_out) *report_out = report;
  // Through the wire format, as the coordinator reads it.
  return protocol::judge(protocol::audit_report_from_json(json::parse(protocol::to_json(report).dump())), tokens.size());
}

std::vector<int32_t> random_tokens(size_t n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab - 3)) + 3);
  return out;
}

const char* kPrompts[] = {"Once upon a time", "The little dog", "Lily and Ben went to the park", "One day, a big",
                          "Tom had a red ball", "The sun was"};

TEST(Audit, HonestGreedyOutputPassesWithNoGapAndRandomTokensFail) {
  ORCHARD_REQUIRE_FILES(kModel);
  ServedModel m = load_served_model(test::data_file(kModel).string(), "stories260K", 1, 0);
  for (const char* prompt : kPrompts) {
    const protocol::Work w = completion_work(prompt, 48, {{"temperature", 0}});
    const std::vector<int32_t> tokens = generate(m, w);
    ASSERT_FALSE(tokens.empty());
    protocol::AuditReport r;
    const protocol::Verdict v = audit(m, w, tokens, &r);
    EXPECT_EQ(v.outcome, protocol::AuditOutcome::Passed) << prompt << ": " << v.why;
    EXPECT_TRUE(r.greedy);
    for (const auto& p : r.positions) EXPECT_EQ(p.gap, 0.0) << prompt << ": the same engine, the same argmax";
    const auto fake = random_tokens(tokens.size(), static_cast<int32_t>(m.engine->hparams().n_vocab), tokens.size());
    const protocol::Verdict caught = audit(m, w, fake);
    EXPECT_EQ(caught.outcome, protocol::AuditOutcome::Failed) << prompt << ": " << caught.why;
  }
}

// Sampled output under several sampling settings, many seeds: never flagged (the bound allows
// 1e-9 per audit); random tokens always are.
TEST(Audit, HonestSampledOutputPassesAndRandomTokensFail) {
  ORCHARD_REQUIRE_FILES(kModel);
  ServedModel m = load_served_model(test::data_file(kModel).string(), "stories260K", 1, 0);
  const json settings[] = {
      json::object(),  // the API's defaults
      {{"temperature", 1.0}, {"top_k", 0}, {"top_p", 1.0}, {"min_p", 0.0}},  // the model's own distribution
      {{"temperature", 1.5}, {"top_p", 0.9}},
      {{"temperature", 0.7}, {"repeat_penalty", 1.3}},
  };
  double worst = -1e300;
  for (const json& s : settings) {
    for (int seed = 1; seed <= 8; ++seed) {
      json sampling = s;
      sampling["seed"] = seed;
      const protocol::Work w = completion_work(kPrompts[seed % 6], 40, sampling);
      const std::vector<int32_t> tokens = generate(m, w);
      ASSERT_FALSE(tokens.empty());
      protocol::AuditReport r;
      const protocol::Verdict v = audit(m, w, tokens, &r);
      EXPECT_EQ(v.outcome, protocol::AuditOutcome::Passed) << s.dump() << " seed " << seed << ": " << v.why;
      EXPECT_FALSE(r.greedy);
      double excess = 0;
      for (const auto& p : r.positions) excess += p.surprisal - p.renyi_half;
      worst = std::max(worst, excess);
      const auto fake = random_tokens(tokens.size(), static_cast<int32_t>(m.engine->hparams().n_vocab), seed);
      const protocol::Verdict caught = audit(m, w, fake);
      EXPECT_EQ(caught.outcome, protocol::AuditOutcome::Failed) << s.dump() << " seed " << seed << ": " << caught.why;
    }
  }
  std::printf("honest sampled audits: the largest Σ(surprisal − H½) was %.1f nats (flagged above %.1f)\n", worst,
              -2 * std::log(1e-9));
}

// The Q4_0 file's greedy output passed off as the F32 model's: the F32 auditor finds tokens
// that were not its argmax, well past the rounding tolerance, on prompts where the two files'
// greedy texts part (both golden prompts do within 24 tokens, as llama.cpp's goldens show).
TEST(Audit, GreedyOutputOfASmallerQuantizationFails) {
  ORCHARD_REQUIRE_FILES(kModel, kQ4);
  ServedModel f32 = load_served_model(test::data_file(kModel).string(), "stories260K", 1, 0);
  ServedModel q4 = load_served_model(test::data_file(kQ4).string(), "stories260K", 1, 0);
  int caught = 0, differ = 0;
  for (const char* prompt : kPrompts) {
    const protocol::Work w = completion_work(prompt, 48, {{"temperature", 0}});
    const std::vector<int32_t> honest = generate(f32, w), cheat = generate(q4, w);
    protocol::AuditReport r;
    const protocol::Verdict v = audit(f32, w, cheat, &r);
    double worst = 0;
    for (const auto& p : r.positions) worst = std::max(worst, p.gap);
    std::printf("%-32s Q4_0 output %s F32's; worst gap %.3f: %s\n", prompt, honest == cheat ? "equals" : "differs from",
                worst, protocol::to_string(v.outcome));
    if (honest != cheat) ++differ;
    if (v.outcome == protocol::AuditOutcome::Failed) ++caught;
    if (honest == cheat) {
      EXPECT_EQ(v.outcome, protocol::AuditOutcome::Passed) << "identical output cannot be told apart";
    }
    if (std::string(prompt) == "Once upon a time" || std::string(prompt) == "The little dog") {
      EXPECT_EQ(v.outcome, protocol::AuditOutcome::Failed) << prompt << ": " << v.why;
    }
  }
  std::printf("Q4_0 passed off as F32: %d of %zu prompts differ, %d caught\n", differ, std::size(kPrompts), caught);
  EXPECT_EQ(caught, differ) << "every differing greedy output is caught";
}

// Canaries with the real engine: the F32 file's reference passes its own output and catches the
// Q4_0 file's on every prompt the network tests use (their first difference comes before any
// close call of the reference; of the six prompts here, one has a close call first).
TEST(Audit, ACanaryReferencePassesItsOwnFileAndCatchesTheSmallerQuantization) {
  ORCHARD_REQUIRE_FILES(kModel, kQ4);
  ServedModel f32 = load_served_model(test::data_file(kModel).string(), "stories260K", 1, 0);
  ServedModel q4 = load_served_model(test::data_file(kQ4).string(), "stories260K", 1, 0);
  int caught = 0;
  for (const char* const& prompt : kPrompts) {
    const protocol::Work w = completion_work(prompt, 40, {{"temperature", 0}});
    const CanaryReference ref = canary_reference(w, f32);
    ASSERT_EQ(ref.tokens.size(), ref.margins.size());
    EXPECT_EQ(ref.tokens, generate(f32, w));
    EXPECT_EQ(protocol::check_canary(ref.tokens, ref.margins, generate(f32, w)).outcome, protocol::AuditOutcome::Passed);
    const protocol::Verdict v = protocol::check_canary(ref.tokens, ref.margins, generate(q4, w));
    std::printf("%-32s canary on the Q4_0 file: %s\n", prompt, v.why.c_str());
    caught += v.outcome == protocol::AuditOutcome::Failed;
    // The four prompts tests/network/audited_node_test.cpp stores as canaries.
    if (&prompt < &kPrompts[4]) {
      EXPECT_EQ(v.outcome, protocol::AuditOutcome::Failed) << prompt;
    }
  }
  std::printf("canaries catching the Q4_0 file: %d of %zu prompts\n", caught, std::size(kPrompts));
  EXPECT_THROW(canary_reference(completion_work("Hi", 8, {{"temperature", 0.5}}), f32), Error);
}

TEST(Audit, MalformedAuditsAreRefusedNamingTheProblem) {
  ORCHARD_REQUIRE_FILES(kModel);
  ServedModel m = load_served_model(test::data_file(kModel).string(), "stories260K", 1, 0);
  protocol::Work w = completion_work("Hi", 4, {{"temperature", 0}});
  auto refusal = [&](const json& body) {
    protocol::Work a = w;
    a.request = {{"api", protocol::kAuditApi}, {"body", body}};
    try {
      run_audit(a, m);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal({{"request", w.request}}).find("'tokens'"), std::string::npos);
  EXPECT_NE(refusal({{"request", w.request}, {"tokens", {1, -2}}}).find("token id"), std::string::npos);
  EXPECT_NE(refusal({{"request", w.request}, {"tokens", {1, 1 << 30}}}).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(refusal({{"request", w.request}, {"tokens", std::vector<int>(5000, 1)}}).find("context"), std::string::npos);
  EXPECT_NE(refusal({{"tokens", {1}}}).find("'request'"), std::string::npos);
  EXPECT_THROW(run_audit(w, m), Error) << "a completions job is not an audit";
}

}  // namespace
}  // namespace orchard::node
