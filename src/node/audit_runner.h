#pragma once
// The auditor's side of an audit job (protocol/audit.h): the audited job's prompt is built as
// the audited node built it (prepare_job), then its returned tokens are fed one by one through
// this node's copy of the model, each scored as the sampler the request asked for sees it.
// As much work as generating them again: one step per token.
#include "node/job_runner.h"
#include "protocol/audit.h"
#include "protocol/messages.h"

namespace orchard::node {

// Throws orchard::Error naming the problem when the request is not an audit this model can
// run (malformed, does not fit the context): the node fails the job with that message.
protocol::AuditReport run_audit(const protocol::Work& w, ServedModel& m);

// A canary's reference (`orchard network canary add`): the tokens a node streams for the
// greedy request `w` on this model, and at each the lead of the best logit over the second.
struct CanaryReference {
  std::vector<int32_t> tokens;
  std::vector<double> margins;
};
// Throws orchard::Error when the request is not greedy without a repetition penalty (a
// canary's answer must not depend on the sampler's draws).
CanaryReference canary_reference(const protocol::Work& w, ServedModel& m);

}  // namespace orchard::node
