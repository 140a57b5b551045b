// Checking nodes' work (docs/verification.md): which completed jobs are audited, judging the
// auditors' reports, and paying jobs once their audit window closed.
#include <cstdio>

#include "network/coordinator_state.h"
#include "network/protocol_names.h"

namespace orchard::network {

using nlohmann::json;

namespace {

// The audit job's report, judged. A report that cannot be read is no verdict on the audited
// node: the auditor's fault, not its.
Verdict judge_audit(Coordinator::State& s, const AuditTask& t) {
  const JobStatus st = s.with_store([&](JobStore& store) { return store.job(t.audit_job); });
  try {
    if (st.output.size() != 1) throw Error("the auditor sent " + std::to_string(st.output.size()) + " chunks, not one report");
    const json j = json::parse(st.output[0]);
    return judge(audit_report_from_json(j), t.tokens, s.opts.audit_rules);
  } catch (const std::exception& e) {
    return {AuditOutcome::Inconclusive, std::string("the auditor's report is unreadable: ") + e.what()};
  }
}

bool probation_applies(const CoordinatorOptions& o) {
  return o.audit_rate > 0 && o.probation_jobs > 0 && o.probation_audit_rate > o.audit_rate;
}

double audit_rate_for(Coordinator::State& s, const std::string& node_id) {
  if (!probation_applies(s.opts)) return s.opts.audit_rate;
  return audit_rate_for(s.opts, s.with_store([&](JobStore& st) { return st.audits_passed(node_id, s.opts.probation_jobs); }));
}

bool draw(Coordinator::State& s, double rate) {
  if (rate <= 0) return false;
  std::lock_guard lock(s.audit_mu);
  return std::uniform_real_distribution<double>(0, 1)(s.audit_draw) < rate;
}

void judge_canary(Coordinator::State& s, const CanaryRun& run) {
  const Verdict v = check_canary(run.canary.tokens, run.canary.margins, run.returned, s.opts.audit_rules);
  s.with_store([&](JobStore& st) { st.record_canary(run, v, unix_ms()); });
  if (v.outcome == AuditOutcome::Failed || s.opts.log)
    std::fprintf(stderr, "coordinator: canary %s (job %s) on node '%s' (owner '%s'): %s: %s; %.1f tokens/s, %.1f predicted\n",
                 run.canary.id.c_str(), run.job_id.c_str(), run.node_id.c_str(), run.owner.c_str(), to_string(v.outcome),
                 v.why.c_str(), run.measured_tps, run.predicted_tps);
  if (v.outcome == AuditOutcome::Failed) {
    std::fprintf(stderr, "coordinator: node '%s' is banned\n", run.node_id.c_str());
    s.work.notify();
  }
}

}  // namespace

double audit_rate_for(const CoordinatorOptions& o, int64_t audits_passed) {
  return probation_applies(o) && audits_passed < o.probation_jobs ? o.probation_audit_rate : o.audit_rate;
}

void judge_audit_job(Coordinator::State& s, const std::string& audit_job) {
  // One judgement at a time: the completion's and the sweep's retry must not both record one.
  std::lock_guard lock(s.judge_mu);
  const auto task = s.with_store([&](JobStore& st) { return st.audit_task(audit_job); });
  if (!task) return;
  const Verdict v = judge_audit(s, *task);
  const AuditDecision d = s.with_store([&](JobStore& st) { return st.record_audit(*task, v.outcome, v.why, unix_ms()); });
  if (v.outcome == AuditOutcome::Failed || task->round == 2 || s.opts.log)
    std::fprintf(stderr, "coordinator: audit %s (round %d, by '%s') of job %s (node '%s', owner '%s'): %s: %s\n",
                 task->audit_job.c_str(), task->round, task->auditor_owner.c_str(), task->audited_job.c_str(),
                 task->node_id.c_str(), task->owner.c_str(), to_string(v.outcome), v.why.c_str());
  if (!d.confirmation.empty()) std::fprintf(stderr, "coordinator: audit %s asks a third owner to confirm\n", d.confirmation.c_str());
  if (!d.banned_node.empty()) std::fprintf(stderr, "coordinator: node '%s' is banned\n", d.banned_node.c_str());
  s.work.notify();  // a confirmation to place, or a banned node's work to move
}

void send_canary(Coordinator::State& s, const std::string& node_id) {
  uint64_t pick = 0;
  {
    std::lock_guard lock(s.audit_mu);
    pick = s.audit_draw();
  }
  try {
    const auto id = s.with_store([&](JobStore& st) { return st.submit_canary(node_id, pick, unix_ms()); });
    if (id) {
      if (s.opts.log) std::fprintf(stderr, "coordinator: canary job %s for node '%s'\n", id->c_str(), node_id.c_str());
      s.work.notify();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coordinator: no canary for node '%s': %s\n", node_id.c_str(), e.what());
  }
}

void settle_due(Coordinator::State& s) {
  for (const std::string& audit : s.with_store([](JobStore& st) { return st.unjudged_audits(); })) judge_audit_job(s, audit);
  std::lock_guard lock(s.settle_mu);
  const std::vector<Completion> due = s.with_store([](JobStore& st) { return st.due_settlements(unix_ms()); });
  for (const Completion& c : due) {
    bool paid = false;
    {
      std::lock_guard ledger_lock(s.ledger_mu);
      paid = s.ledger.entry_for_job(c.job_id).has_value();
    }
    // Recorded in the ledger first: a coordinator stopping in between pays nothing twice
    // (the ledger entry is found at the next round).
    if (!paid) pay(s, c);
    s.with_store([&](JobStore& st) { st.mark_paid(c.job_id, unix_ms()); });
  }
}

json settle_completion(Coordinator::State& s, const Completion& c) {
  if (c.first) {
    if (c.kind == kAuditJob) {
      judge_audit_job(s, c.job_id);
    } else if (c.kind == kCanaryJob) {
      if (const auto run = s.with_store([&](JobStore& st) { return st.canary_run(c.job_id); })) judge_canary(s, *run);
    }
    if (c.kind == kClientJob && draw(s, s.opts.canary_rate)) send_canary(s, c.node_id);
    if (c.kind == kClientJob && draw(s, audit_rate_for(s, c.node_id))) {
      const auto audit = s.with_store([&](JobStore& st) { return st.submit_audit(c.job_id, unix_ms()); });
      if (audit) {
        if (s.opts.log) std::fprintf(stderr, "coordinator: job %s is audited by %s\n", c.job_id.c_str(), audit->c_str());
        s.work.notify();
      }
    }
  }
  settle_due(s);
  const auto state = s.with_store([&](JobStore& st) { return st.settlement(c.job_id); });
  std::optional<int64_t> seq;
  {
    std::lock_guard lock(s.ledger_mu);
    if (const auto e = s.ledger.entry_for_job(c.job_id)) seq = e->seq;
  }
  return {{"credits", job_credits(c.usage)},
          {"settlement", state ? to_string(*state) : "pending"},
          {"ledger_seq", seq ? json(*seq) : json()}};
}

}  // namespace orchard::network
