#include "node/audit_runner.h"

#include <algorithm>
#include <cmath>

#include "model/sampler.h"

namespace orchard::node {

protocol::AuditReport run_audit(const protocol::Work& w, ServedModel& m) {
  if (!w.request.is_object() || w.request.value("api", "") != protocol::kAuditApi || !w.request.contains("body"))
    throw Error("job " + w.job_id + ": not an audit request");
  const protocol::AuditRequest a = protocol::audit_request_from_json(w.request["body"]);
  // The audited job as its node received it, from the start.
  protocol::Work audited = w;
  audited.request = a.request;
  audited.output.clear();
  audited.output_tokens.clear();
  const PreparedJob p = prepare_job(audited, m);
  const int64_t n_vocab = m.engine->hparams().n_vocab;
  const auto forward = m.sequence();
  if (static_cast<int64_t>(p.tokens.size() + a.tokens.size()) > forward->capacity())
    throw Error("job " + w.job_id + ": the prompt and the " + std::to_string(a.tokens.size()) +
                " tokens to audit do not fit this node's context (" + std::to_string(forward->capacity()) + ")");
  const SamplerOptions& sampling = p.options.sampling;
  protocol::AuditReport report;
  report.greedy = sampling.temperature <= 0;
  std::vector<int32_t> context(p.tokens.begin(), p.tokens.end());
  std::vector<float> logits;
  forward->feed(p.tokens, logits);
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    const int32_t token = a.tokens[i];
    if (token >= n_vocab)
      throw Error("job " + w.job_id + ": token " + std::to_string(i) + " (" + std::to_string(token) +
                  ") is outside the vocabulary");
    // The penalty's window as Sampler::accept keeps it: the last repeat_last_n of the context.
    const size_t window = sampling.repeat_last_n > 0 ? static_cast<size_t>(sampling.repeat_last_n) : 0;
    const size_t from = context.size() - std::min(window, context.size());
    const TokenScore s =
        score_token(logits.data(), n_vocab, sampling, std::span<const int32_t>(context.data() + from, context.size() - from), token);
    report.positions.push_back({s.gap, s.surprisal, s.entropy, s.renyi_half});
    context.push_back(token);
    if (i + 1 < a.tokens.size()) forward->feed(std::span<const TokenId>(&a.tokens[i], 1), logits);
  }
  return report;
}

CanaryReference canary_reference(const protocol::Work& w, ServedModel& m) {
  const PreparedJob p = prepare_job(w, m);
  if (p.options.sampling.temperature > 0 || p.options.sampling.repeat_penalty != 1.0f)
    throw Error("a canary must be greedy (temperature 0) without a repetition penalty");
  CanaryReference ref;
  m.generate(p.tokens, p.options, [&](const std::string&, std::span<const TokenId> t) {
    ref.tokens.insert(ref.tokens.end(), t.begin(), t.end());
    return true;
  });
  const int64_t n_vocab = m.engine->hparams().n_vocab;
  const auto forward = m.sequence();
  std::vector<float> logits;
  forward->feed(p.tokens, logits);
  for (size_t i = 0; i < ref.tokens.size(); ++i) {
    float best = -INFINITY, second = -INFINITY;
    for (int64_t v = 0; v < n_vocab; ++v) {
      if (logits[v] > best) second = best, best = logits[v];
      else if (logits[v] > second) second = logits[v];
    }
    ref.margins.push_back(static_cast<double>(best) - second);
    if (i + 1 < ref.tokens.size()) forward->feed(std::span<const TokenId>(&ref.tokens[i], 1), logits);
  }
  return ref;
}

}  // namespace orchard::node
