// `orchard network …`: the network's tools. For now `ledger`: check a credit ledger's
// invariants, show an account's balance and the head.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "network/credits.h"
#include "network/ledger.h"
#include "tensor/error.h"

namespace orchard::cli {
namespace {

struct LedgerOpts {
  std::string db;
  bool verify = false;
  std::string balance;
  std::string trusted_key;  // hex Ed25519 public key
};

std::string credits_text(int64_t micro) {
  const bool neg = micro < 0;
  const uint64_t m = neg ? 0 - static_cast<uint64_t>(micro) : static_cast<uint64_t>(micro);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%llu.%06llu", neg ? "-" : "",
                static_cast<unsigned long long>(m / network::kMicroPerCredit),
                static_cast<unsigned long long>(m % network::kMicroPerCredit));
  return buf;
}

// The exit status: 0, or 1 when --verify found violations.
int ledger(const LedgerOpts& o) {
  // Looking at a ledger must not create one (a mistyped path would "verify" as empty).
  if (!std::filesystem::exists(o.db)) throw Error(o.db + ": no such ledger file");
  auto l = network::Ledger::open(o.db);
  if (!o.balance.empty()) {
    const int64_t b = l.balance(o.balance);
    std::printf("%s: %s credits (%lld micro-credits, %zu entries)\n", o.balance.c_str(), credits_text(b).c_str(),
                static_cast<long long>(b), l.entries_for(o.balance).size());
  }
  if (o.verify) {
    network::KeyPtr trusted;
    if (!o.trusted_key.empty()) trusted = network::public_key_from_hex(o.trusted_key);
    const auto r = l.verify(trusted.get());
    if (!r.ok()) {
      std::fflush(stdout);
      std::fprintf(stderr, "%s: ledger does not verify (%zu violation%s):\n", o.db.c_str(), r.violations.size(),
                   r.violations.size() == 1 ? "" : "s");
      for (const auto& v : r.violations) std::fprintf(stderr, "  %s\n", v.c_str());
      return 1;
    }
    std::printf("%s: ledger verifies: %lld entries, %lld signed heads, balances sum to zero\n", o.db.c_str(),
                static_cast<long long>(r.entries), static_cast<long long>(r.signed_heads));
  }
  if (o.balance.empty() && !o.verify) {
    const auto h = l.head();
    std::printf("%s: head seq %lld hash %s, %zu accounts\n", o.db.c_str(), static_cast<long long>(h.seq),
                h.hash.c_str(), l.accounts().size());
  }
  return 0;
}

}  // namespace

void register_network(CLI::App& app) {
  auto* net = app.add_subcommand("network", "The volunteer network: the credit ledger");
  net->require_subcommand(1);

  auto o = std::make_shared<LedgerOpts>();
  auto* cmd = net->add_subcommand("ledger", "Check a credit ledger, show balances");
  cmd->add_option("--db", o->db, "The ledger file (SQLite)")->required();
  cmd->add_flag("--verify", o->verify,
                "Check every invariant: hash chain, hashes, positive amounts, each job paid once, "
                "balances summing to zero, signed heads; exit 1 naming each violation");
  cmd->add_option("--balance", o->balance, "Print the balance of ACCOUNT")->type_name("ACCOUNT");
  cmd->add_option("--trusted-key", o->trusted_key,
                  "With --verify: the coordinator's Ed25519 public key (64 hex digits); heads signed by "
                  "any other key are violations")
      ->type_name("HEX");
  cmd->footer(
      "Examples:\n"
      "  orchard network ledger --db ledger.sqlite                 # head and number of accounts\n"
      "  orchard network ledger --db ledger.sqlite --verify\n"
      "  orchard network ledger --db ledger.sqlite --balance alice\n"
      "  orchard network ledger --db ledger.sqlite --verify --trusted-key 3b6a27bc…\n"
      "Amounts are credits with six decimals (integer micro-credits inside); docs/network.md has\n"
      "the rate table. Exit status: 0 when the ledger verifies, 1 otherwise.");
  cmd->callback([o] {
    if (const int rc = ledger(*o)) {
      std::fflush(stdout);
      std::exit(rc);
    }
  });
}

}  // namespace orchard::cli
