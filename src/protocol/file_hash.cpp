#include "protocol/file_hash.h"

#include <openssl/evp.h>

#include <fstream>
#include <memory>
#include <vector>

#include "protocol/ledger_entry.h"
#include "tensor/error.h"

namespace orchard::protocol {

std::string file_sha256(const std::filesystem::path& path, const std::function<void(uint64_t, uint64_t)>& progress) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot read the file to hash it");
  std::error_code ec;
  const uint64_t total = std::filesystem::file_size(path, ec);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error("SHA-256 failed (OpenSSL)");
  std::vector<char> buf(size_t{1} << 20);
  uint64_t done = 0, next_report = uint64_t{1} << 30;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    if (EVP_DigestUpdate(ctx.get(), buf.data(), n) != 1) throw Error("SHA-256 failed (OpenSSL)");
    done += n;
    if (progress && done >= next_report) {
      progress(done, total);
      next_report += uint64_t{1} << 30;
    }
  }
  if (in.bad()) throw Error(path.string() + ": reading failed while hashing it");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) throw Error("SHA-256 failed (OpenSSL)");
  return to_hex(md, len);
}

}  // namespace orchard::protocol
