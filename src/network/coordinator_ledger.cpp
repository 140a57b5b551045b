// The coordinator's ledger duties beyond paying (docs/network-protocol.md, "Ledger"): signing
// the head with its own key on a schedule and at shutdown, and the public endpoints an owner
// checks its entries with (ledger_proof.h says what the check proves and what it shows).
#include <charconv>
#include <cstdio>

#include "network/coordinator_state.h"
#include "network/protocol_names.h"
#include "serve/http_util.h"

namespace orchard::network {

using nlohmann::json;
using serve::ApiError;

void sign_head_if_moved(Coordinator::State& s) {
  try {
    std::lock_guard lock(s.ledger_mu);
    const Head h = s.ledger.head();
    if (h.seq == 0) return;  // nothing paid yet: nothing to pin
    const auto last = s.ledger.latest_signed_head();
    if (last && last->seq == h.seq && last->hash == h.hash && last->public_key == s.signer.public_key_hex()) return;
    const SignedHead sh = s.ledger.sign_head(s.signer.key());
    if (s.opts.log) std::fprintf(stderr, "coordinator: signed the ledger head at seq %lld\n", static_cast<long long>(sh.seq));
  } catch (const std::exception& e) {
    // A busy or failing file: the next round signs; owners see an older head meanwhile.
    std::fprintf(stderr, "coordinator: signing the ledger head failed: %s\n", e.what());
  }
}

namespace {

// Entries per answer: an owner pages through longer spans.
constexpr int64_t kMaxEntriesPerAnswer = 1000;

int64_t seq_param(const httplib::Request& req, const char* name, std::optional<int64_t> fallback) {
  if (!req.has_param(name)) {
    if (fallback) return *fallback;
    throw ApiError::bad_request(std::string("the query parameter '") + name + "' is required", name);
  }
  const std::string v = req.get_param_value(name);
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size() || out < 0)
    throw ApiError::bad_request(std::string("'") + name + "' must be a sequence number (an integer ≥ 0), not '" + v + "'", name);
  return out;
}

json entries_json(const std::vector<Entry>& entries) {
  json out = json::array();
  for (const Entry& e : entries) out.push_back(to_json(e));
  return out;
}

void head(Coordinator::State& s, const httplib::Request&, httplib::Response& res) {
  std::optional<SignedHead> h;
  {
    std::lock_guard lock(s.ledger_mu);
    h = s.ledger.latest_signed_head();
  }
  if (!h)
    throw ApiError(404, "invalid_request_error", "the ledger has no signed head yet (nothing was paid, or the first signing is due)",
                   {}, "no_signed_head");
  serve::send_json(res, to_json(*h));
}

// An account's entries after `after`, at most kMaxEntriesPerAnswer; `more` says whether to ask again.
void account_entries(Coordinator::State& s, const httplib::Request& req, httplib::Response& res) {
  const std::string account = req.get_param_value("account");
  if (account.empty()) throw ApiError::bad_request("the query parameter 'account' is required", "account");
  const int64_t after = seq_param(req, "after", 0);
  std::vector<Entry> all;
  {
    std::lock_guard lock(s.ledger_mu);
    all = s.ledger.entries_for(account);
  }
  std::vector<Entry> page;
  bool more = false;
  for (Entry& e : all) {
    if (e.seq <= after) continue;
    if (static_cast<int64_t>(page.size()) == kMaxEntriesPerAnswer) {
      more = true;
      break;
    }
    page.push_back(std::move(e));
  }
  serve::send_json(res, {{"account", account}, {"entries", entries_json(page)}, {"more", more}});
}

void chain(Coordinator::State& s, const httplib::Request& req, httplib::Response& res) {
  const int64_t from = seq_param(req, "from", std::nullopt), to = seq_param(req, "to", std::nullopt);
  if (from < 1 || to < from)
    throw ApiError::bad_request("'from' and 'to' must satisfy 1 ≤ from ≤ to", from < 1 ? "from" : "to");
  if (to - from + 1 > kMaxEntriesPerAnswer)
    throw ApiError::bad_request("at most " + std::to_string(kMaxEntriesPerAnswer) + " entries per request: ask in pages", "to");
  std::vector<Entry> entries;
  {
    std::lock_guard lock(s.ledger_mu);
    entries = s.ledger.entries_range(from, to);
  }
  serve::send_json(res, {{"entries", entries_json(entries)}});
}

}  // namespace

void add_ledger_routes(Coordinator::State& s) {
  using Action = void (*)(Coordinator::State&, const httplib::Request&, httplib::Response&);
  auto route = [&s](Action f) {
    return serve::guarded(serve::openai_error, [&s, f](const auto& req, auto& res) { f(s, req, res); });
  };
  s.http->Get(kLedgerKeyPath, route([](Coordinator::State& st, const httplib::Request&, httplib::Response& res) {
               serve::send_json(res, {{"public_key", st.signer.public_key_hex()}, {"algorithm", "ed25519"}});
             }));
  s.http->Get(kLedgerHeadPath, route(head));
  s.http->Get(kLedgerEntriesPath, route(account_entries));
  s.http->Get(kLedgerChainPath, route(chain));
}

}  // namespace orchard::network
