#include "node/ledger_check.h"

#include <httplib.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "protocol/keys.h"
#include "tensor/error.h"

namespace orchard::node {

using nlohmann::json;
using protocol::Entry;

namespace {

// A public GET; nullopt for a 404 (nothing there yet), the JSON for a 200, else an error.
std::optional<json> get_json(const std::string& url, const std::string& ca_cert, const std::string& path) {
  httplib::Client c(url);
  if (!ca_cert.empty()) c.set_ca_cert_path(ca_cert.c_str());
  c.set_connection_timeout(10, 0);
  c.set_read_timeout(60, 0);
  const std::string where = "GET " + url + path;
  const httplib::Result r = c.Get(path);
  if (!r) throw Error(where + ": no answer (" + httplib::to_string(r.error()) + ")");
  if (r->status == 404) return std::nullopt;
  const json j = json::parse(r->body, nullptr, false);
  if (r->status != 200) throw Error(where + ": HTTP " + std::to_string(r->status) + ": " + r->body);
  if (j.is_discarded() || !j.is_object()) throw Error(where + ": the reply is not a JSON object");
  return j;
}

// Runs `f` (which reads a reply) and names the request when the reply is malformed.
template <class F>
auto parsed(const std::string& where, F f) {
  try {
    return f();
  } catch (const json::exception& e) {
    throw Error(where + ": malformed reply: " + e.what());
  } catch (const Error& e) {
    throw Error(where + ": malformed reply: " + e.what());
  }
}

std::vector<Entry> entries_of(const json& reply) {
  std::vector<Entry> out;
  for (const json& e : reply.at("entries")) out.push_back(protocol::entry_from_json(e));
  return out;
}

std::string query_value(const std::string& v) {
  std::string out;
  for (unsigned char c : v) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out;
}

struct Pin {
  std::string key;
  std::optional<protocol::Head> anchor;  // for `account` only
};

Pin read_pin(const std::filesystem::path& path, const std::string& account) {
  Pin p;
  if (path.empty() || !std::filesystem::exists(path)) return p;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (!in || j.is_discarded() || !j.is_object() || !j.contains("public_key") || !j["public_key"].is_string())
    throw Error(path.string() + ": not a pin file (JSON with the coordinator's public_key); remove it to pin again");
  p.key = j["public_key"];
  if (j.contains("verified") && j["verified"].is_object() && j["verified"].value("account", "") == account)
    p.anchor = protocol::Head{j["verified"].value("seq", int64_t{0}), j["verified"].value("hash", "")};
  return p;
}

// Temp file + rename: a check interrupted mid-write leaves the old pin, never half a file.
void write_pin(const std::filesystem::path& path, const std::string& coordinator, const std::string& key,
               const std::string& account, const std::optional<protocol::SignedHead>& head) {
  if (path.empty()) return;
  json j = {{"coordinator", coordinator}, {"public_key", key}};
  if (head) j["verified"] = {{"account", account}, {"seq", head->seq}, {"hash", head->hash}};
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  const std::filesystem::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << '\n';
    if (!out.flush()) throw Error(tmp.string() + ": cannot write the pin file");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(path.string() + ": cannot write the pin file: " + ec.message());
}

}  // namespace

LedgerCheckResult check_owner_ledger(const LedgerCheckOptions& o) {
  if (o.account.empty()) throw Error("checking the ledger needs the owner's account");
  LedgerCheckResult r;
  Pin pin = read_pin(o.pin_file, o.account);
  if (!o.trusted_key.empty()) {
    protocol::public_key_from_hex(o.trusted_key);  // throws naming a malformed key
    if (pin.key != o.trusted_key) pin.anchor.reset();  // that anchor was verified under another key
    r.key = o.trusted_key;
  } else if (!pin.key.empty()) {
    r.key = pin.key;
  } else {
    const std::string where = "GET " + o.coordinator + protocol::kLedgerKeyPath;
    const auto reply = get_json(o.coordinator, o.ca_cert, protocol::kLedgerKeyPath);
    if (!reply) throw Error(where + ": the coordinator serves no ledger key (too old a coordinator?)");
    r.key = parsed(where, [&] { return reply->at("public_key").get<std::string>(); });
    protocol::public_key_from_hex(r.key);
    r.pinned_now = true;
  }

  const std::string head_where = "GET " + o.coordinator + protocol::kLedgerHeadPath;
  if (const auto h = get_json(o.coordinator, o.ca_cert, protocol::kLedgerHeadPath))
    r.head = parsed(head_where, [&] { return protocol::signed_head_from_json(*h); });
  if (!r.head) {
    if (r.pinned_now || !o.trusted_key.empty()) write_pin(o.pin_file, o.coordinator, r.key, o.account, std::nullopt);
    return r;
  }

  protocol::OwnerProof p;
  p.head = *r.head;
  p.anchor = pin.anchor;
  for (int64_t after = 0;;) {
    const std::string path = std::string(protocol::kLedgerEntriesPath) + "?account=" + query_value(o.account) +
                             "&after=" + std::to_string(after);
    const auto reply = get_json(o.coordinator, o.ca_cert, path);
    if (!reply) throw Error("GET " + o.coordinator + path + ": not found (too old a coordinator?)");
    const auto page = parsed("GET " + o.coordinator + path, [&] { return entries_of(*reply); });
    p.listed.insert(p.listed.end(), page.begin(), page.end());
    if (page.empty() || !reply->value("more", false)) break;
    after = page.back().seq;
  }
  // The chain in pages, from where the proof starts to the signed head.
  constexpr int64_t kPage = 1000;
  for (int64_t from = protocol::proof_start(p.head, p.listed, p.anchor); from <= p.head.seq; from += kPage) {
    const int64_t to = std::min(p.head.seq, from + kPage - 1);
    const std::string path =
        std::string(protocol::kLedgerChainPath) + "?from=" + std::to_string(from) + "&to=" + std::to_string(to);
    const auto reply = get_json(o.coordinator, o.ca_cert, path);
    if (!reply) throw Error("GET " + o.coordinator + path + ": not found (too old a coordinator?)");
    const auto page = parsed("GET " + o.coordinator + path, [&] { return entries_of(*reply); });
    p.chain.insert(p.chain.end(), page.begin(), page.end());
    if (static_cast<int64_t>(page.size()) < to - from + 1) break;  // the check names the gap
  }
  r.check = protocol::check_owner_proof(p, r.key, o.account);
  if (r.check.ok()) write_pin(o.pin_file, o.coordinator, r.key, o.account, r.head);
  return r;
}

}  // namespace orchard::node
