#include "protocol/ledger_entry.h"

#include <openssl/evp.h>

#include "tensor/error.h"

namespace orchard::protocol {
namespace {

void field(std::string& out, const std::string& v) {
  out += std::to_string(v.size());
  out += ':';
  out += v;
  out += ',';
}

}  // namespace

std::string to_hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 15];
  }
  return s;
}

bool from_hex(const std::string& hex, std::string& out) {
  if (hex.size() % 2) return false;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out.assign(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nib(hex[2 * i]), lo = nib(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return true;
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr) != 1)
    throw Error("ledger: SHA-256 failed (OpenSSL)");
  return to_hex(md, n);
}

std::string entry_hash(const Entry& e) {
  std::string s = "orchard-ledger-entry-v1,";
  field(s, std::to_string(e.seq));
  field(s, e.job_id);
  field(s, std::to_string(e.attempt));
  field(s, e.payer);
  field(s, e.payee);
  field(s, std::to_string(e.amount));
  field(s, e.details);
  field(s, std::to_string(e.created_at));
  field(s, e.prev_hash);
  return sha256_hex(s);
}

std::string head_message(int64_t seq, const std::string& hash) {
  std::string s = "orchard-ledger-head-v1,";
  field(s, std::to_string(seq));
  field(s, hash);
  return s;
}

}  // namespace orchard::protocol
