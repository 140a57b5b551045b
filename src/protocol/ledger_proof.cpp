#include "protocol/ledger_proof.h"

#include <map>

#include "model/json_number.h"
#include "protocol/json_field.h"
#include "protocol/ledger_entry.h"
#include "protocol/node_identity.h"
#include "tensor/error.h"

namespace orchard::protocol {

using nlohmann::json;

namespace {

std::string seq_text(int64_t seq) { return "seq " + std::to_string(seq); }

bool same_entry(const Entry& a, const Entry& b) {
  return a.seq == b.seq && a.job_id == b.job_id && a.attempt == b.attempt && a.payer == b.payer &&
         a.payee == b.payee && a.amount == b.amount && a.details == b.details && a.created_at == b.created_at &&
         a.prev_hash == b.prev_hash && a.hash == b.hash;
}

bool involves(const Entry& e, const std::string& account) { return e.payer == account || e.payee == account; }

}  // namespace

json to_json(const Entry& e) {
  return {{"seq", e.seq},         {"job_id", e.job_id},       {"attempt", e.attempt},
          {"payer", e.payer},     {"payee", e.payee},         {"amount", e.amount},
          {"details", e.details}, {"created_at", e.created_at}, {"prev_hash", e.prev_hash},
          {"hash", e.hash}};
}

json to_json(const SignedHead& h) {
  return {{"seq", h.seq}, {"hash", h.hash}, {"public_key", h.public_key}, {"signature", h.signature}, {"signed_at", h.signed_at}};
}

Entry entry_from_json(const json& j) {
  const char* what = "ledger entry";
  Entry e;
  e.seq = required_field<int64_t>(j, what, "seq");
  e.job_id = required_field<std::string>(j, what, "job_id");
  e.attempt = required_field<int64_t>(j, what, "attempt");
  e.payer = required_field<std::string>(j, what, "payer");
  e.payee = required_field<std::string>(j, what, "payee");
  e.amount = required_field<int64_t>(j, what, "amount");
  e.details = required_field<std::string>(j, what, "details");
  e.created_at = required_field<int64_t>(j, what, "created_at");
  e.prev_hash = required_field<std::string>(j, what, "prev_hash");
  e.hash = required_field<std::string>(j, what, "hash");
  return e;
}

SignedHead signed_head_from_json(const json& j) {
  const char* what = "signed head";
  return {required_field<int64_t>(j, what, "seq"), required_field<std::string>(j, what, "hash"), required_field<std::string>(j, what, "public_key"),
          required_field<std::string>(j, what, "signature"), required_field<int64_t>(j, what, "signed_at")};
}

int64_t proof_start(const SignedHead& head, const std::vector<Entry>& listed, const std::optional<Head>& anchor) {
  if (anchor) return anchor->seq + 1;
  for (const Entry& e : listed)
    if (e.seq <= head.seq) return e.seq;  // listed in chain order: the first is the earliest
  return head.seq + 1;
}

OwnerCheck check_owner_proof(const OwnerProof& p, const std::string& trusted_key_hex, const std::string& account) {
  OwnerCheck r;
  auto add = [&](std::string v) { r.violations.push_back(std::move(v)); };
  const SignedHead& h = p.head;
  const std::string at_head = "the signed head (" + seq_text(h.seq) + ")";

  // The head: by the trusted key, and its signature over exactly this (seq, hash).
  if (h.public_key != trusted_key_hex)
    add(at_head + " is signed by key " + h.public_key + ", not the trusted key " + trusted_key_hex);
  else if (!verify_node_signature(trusted_key_hex, head_message(h.seq, h.hash), h.signature))
    add(at_head + ": the signature does not verify (a forged or altered head)");

  // The segment: contiguous from the start, every hash recomputed, every link, ending at the head.
  const int64_t start = proof_start(h, p.listed, p.anchor);
  if (p.anchor && p.anchor->seq > h.seq)
    add(at_head + " is behind the head verified before (" + seq_text(p.anchor->seq) + "): the ledger went back");
  std::string prev = p.anchor ? p.anchor->hash : (p.chain.empty() ? std::string() : p.chain.front().prev_hash);
  int64_t expected = start;
  for (const Entry& e : p.chain) {
    if (e.seq != expected) {
      add("the chain is not contiguous: " + seq_text(expected) + " expected, " + seq_text(e.seq) + " served");
      break;
    }
    if (e.prev_hash != prev)
      add("the chain is broken at " + seq_text(e.seq) + ": prev_hash does not match the hash before it" +
          (p.anchor && e.seq == p.anchor->seq + 1 ? " (the head verified before)" : ""));
    if (entry_hash(e) != e.hash) add("entry " + seq_text(e.seq) + " (job " + e.job_id + ") was altered: its hash does not match its fields");
    prev = e.hash;
    ++expected;
  }
  if (p.chain.empty()) {
    if (start <= h.seq)
      add("no chain was served from " + seq_text(start) + " to " + at_head + ", so nothing links the entries to it");
    else if (p.anchor && p.anchor->seq == h.seq && p.anchor->hash != h.hash)
      add(at_head + " has another hash than the head verified before at that seq: the ledger was rewritten");
  } else if (p.chain.back().seq != h.seq || p.chain.back().hash != h.hash) {
    add("the chain does not end at " + at_head + ": its last entry (" + seq_text(p.chain.back().seq) +
        ") has another seq or hash, so the entries served are not the ones signed");
  }

  // The account's entries: each listed one under the head is the chain's, unaltered; none left out.
  std::map<int64_t, const Entry*> by_seq;
  for (const Entry& e : p.chain) by_seq[e.seq] = &e;
  std::map<int64_t, bool> listed_seqs;
  for (const Entry& e : p.listed) {
    if (!involves(e, account)) add("entry " + seq_text(e.seq) + " is listed for '" + account + "' but neither pays nor credits it");
    listed_seqs[e.seq] = true;
    if (e.seq > h.seq) {
      ++r.pending;
      continue;
    }
    if (e.seq < start) {
      ++r.earlier;
      continue;
    }
    auto it = by_seq.find(e.seq);
    if (it == by_seq.end()) add("entry " + seq_text(e.seq) + " (job " + e.job_id + ") is missing from the chain");
    else if (!same_entry(e, *it->second))
      add("entry " + seq_text(e.seq) + " (job " + e.job_id + ") differs from the chain's entry at that seq");
    else
      ++r.verified;
  }
  for (const Entry& e : p.chain)
    if (involves(e, account) && !listed_seqs.count(e.seq))
      add("entry " + seq_text(e.seq) + " (job " + e.job_id + ") of '" + account + "' is in the chain but was left out of its list");
  return r;
}

}  // namespace orchard::protocol
