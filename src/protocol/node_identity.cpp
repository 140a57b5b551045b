#include "protocol/node_identity.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "protocol/ledger_entry.h"
#include "protocol/secure_random.h"
#include "tensor/error.h"

namespace orchard::protocol {
namespace {

namespace fs = std::filesystem;

// An Ed25519 PEM key is about 120 bytes; anything much larger is not one.
constexpr size_t kMaxKeyFileBytes = 64 * 1024;

std::string errno_text() { return std::strerror(errno); }

// Closes a file descriptor on every path out, exceptions included.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error a deferred write may only show here.
  bool close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0;
  }

 private:
  int fd_;
};

// OpenSSL would otherwise prompt on the terminal for an encrypted key; a node runs unattended,
// so an encrypted key file is refused instead.
int no_password(char*, int, int, void*) { return -1; }

KeyPtr parse_private_key(const std::string& pem, const std::string& where) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (!bio) throw Error(where + ": out of memory reading the node key");
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, no_password, nullptr);
  BIO_free(bio);
  ERR_clear_error();  // a failed parse leaves errors queued that would confuse later checks
  if (!key) throw Error(where + ": not a PEM private key (corrupt, truncated or encrypted node key file)");
  KeyPtr owned(key);
  if (EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) throw Error(where + ": the node key is not an Ed25519 key");
  return owned;
}

KeyPtr read_key_file(int fd, const std::string& where) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(where + ": cannot stat the node key: " + errno_text());
  if (!S_ISREG(st.st_mode)) throw Error(where + ": the node key path is not a regular file");
  if (static_cast<size_t>(st.st_size) > kMaxKeyFileBytes)
    throw Error(where + ": node key file is " + std::to_string(st.st_size) + " bytes, too large to be a key");
  std::string pem(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < pem.size()) {
    const ssize_t n = ::read(fd, pem.data() + got, pem.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(where + ": cannot read the node key: " + errno_text());
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  pem.resize(got);
  KeyPtr key = parse_private_key(pem, where);
  OPENSSL_cleanse(pem.data(), pem.size());
  return key;
}

std::string private_key_pem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  const bool ok = bio && PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  std::string pem;
  if (ok) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    pem.assign(data, static_cast<size_t>(n));
  }
  BIO_free(bio);
  if (!ok) throw Error("encoding the node key as PEM failed (OpenSSL)");
  return pem;
}

void write_all(int fd, const std::string& bytes, const std::string& where) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(where + ": cannot write the node key: " + errno_text());
    done += static_cast<size_t>(n);
  }
}

// The directory entry of a freshly linked file is durable only once its directory is synced.
void sync_directory(const fs::path& dir) {
  Fd d(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() >= 0) ::fsync(d.get());
}

// Outcome of trying to put a new key file in place.
enum class Placed { Ours, Theirs };

// Writes `pem` to a private temp file beside `path`, syncs it, and links it to `path`. link()
// fails when `path` already exists, so a concurrent first start cannot overwrite a key another
// process is already using; that process's key is loaded instead (Theirs).
Placed place_key_file(const fs::path& path, const std::string& pem) {
  const std::string where = path.string();
  const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid()) + "-" + random_hex(8);
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) throw Error(where + ": cannot create the node key file " + tmp.string() + ": " + errno_text());
    try {
      if (::fchmod(fd.get(), 0600) != 0) throw Error(where + ": cannot restrict the node key's mode: " + errno_text());
      write_all(fd.get(), pem, where);
      if (::fsync(fd.get()) != 0) throw Error(where + ": cannot sync the node key: " + errno_text());
      if (!fd.close()) throw Error(where + ": cannot write the node key: " + errno_text());
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  Placed placed = Placed::Ours;
  if (::link(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    if (err == EEXIST) {
      placed = Placed::Theirs;
    } else if (err == EPERM || err == ENOTSUP || err == EOPNOTSUPP || err == ENOSYS) {
      // A filesystem without hard links: rename instead, which loses only the race guard.
      if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = errno_text();
        ::unlink(tmp.c_str());
        throw Error(where + ": cannot move the node key into place: " + why);
      }
      sync_directory(path.parent_path());
      return Placed::Ours;
    } else {
      ::unlink(tmp.c_str());
      throw Error(where + ": cannot move the node key into place: " + std::strerror(err));
    }
  }
  ::unlink(tmp.c_str());
  sync_directory(path.parent_path());
  return placed;
}

std::string raw_public_key(EVP_PKEY* key) {
  unsigned char raw[32];
  size_t n = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(key, raw, &n) != 1 || n != sizeof raw) throw Error("not an Ed25519 key");
  return std::string(reinterpret_cast<const char*>(raw), n);
}

std::string id_for_raw_key(const std::string& raw) { return "node-" + sha256_hex(raw).substr(0, 32); }

}  // namespace

NodeIdentity::NodeIdentity(KeyPtr key) : key_(std::move(key)) {
  const std::string raw = raw_public_key(key_.get());
  public_key_hex_ = to_hex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
  id_ = id_for_raw_key(raw);
}

NodeIdentity NodeIdentity::from_key(KeyPtr key) {
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) throw Error("a node identity needs an Ed25519 key");
  return NodeIdentity(std::move(key));
}

NodeIdentity NodeIdentity::load_or_create(const fs::path& path) {
  const std::string where = path.string();
  if (where.empty()) throw Error("the node key path is empty");
  // Try the file first: the common case, and the only one where a key already exists.
  for (int round = 0; round < 2; ++round) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() >= 0) return NodeIdentity(read_key_file(fd.get(), where));
    if (errno != ENOENT) throw Error(where + ": cannot open the node key: " + errno_text());
    if (round == 1) break;  // linked a moment ago yet gone again: someone is deleting it

    std::error_code ec;
    if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
    if (ec) throw Error(where + ": cannot create the node key's directory: " + ec.message());
    KeyPtr key = generate_ed25519_key();
    std::string pem = private_key_pem(key.get());
    const Placed placed = place_key_file(path, pem);
    OPENSSL_cleanse(pem.data(), pem.size());
    if (placed == Placed::Ours) return NodeIdentity(std::move(key));
    // Another process created the key between our open() and link(): use theirs (next round).
  }
  throw Error(where + ": the node key file disappeared while it was being created");
}

std::string NodeIdentity::sign(std::string_view message) const {
  unsigned char sig[64];
  size_t sig_len = sizeof sig;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok =
      ctx && EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key_.get()) == 1 &&
      EVP_DigestSign(ctx, sig, &sig_len, reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) throw Error(id_ + ": signing failed (OpenSSL)");
  return to_hex(sig, sig_len);
}

std::optional<std::string> node_id_for_public_key(std::string_view public_key_hex) {
  std::string raw;
  if (public_key_hex.size() != 64 || !from_hex(std::string(public_key_hex), raw)) return std::nullopt;
  return id_for_raw_key(raw);
}

bool verify_node_signature(std::string_view public_key_hex, std::string_view message,
                           std::string_view signature_hex) noexcept {
  try {
    std::string raw_key, sig;
    if (public_key_hex.size() != 64 || !from_hex(std::string(public_key_hex), raw_key)) return false;
    if (signature_hex.size() != 128 || !from_hex(std::string(signature_hex), sig)) return false;
    KeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                           reinterpret_cast<const unsigned char*>(raw_key.data()), raw_key.size()));
    if (!key) {
      ERR_clear_error();
      return false;
    }
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    const bool ok = ctx && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key.get()) == 1 &&
                    EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return ok;
  } catch (...) {
    return false;
  }
}

}  // namespace orchard::protocol
