#include "protocol/memory_proof.h"

#include <openssl/evp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "model/json_number.h"
#include "protocol/json_field.h"
#include "protocol/ledger_entry.h"
#include "protocol/secure_random.h"
#include "tensor/huge_buffer.h"
#include "tensor/error.h"

namespace orchard::protocol {

namespace {

static_assert(std::endian::native == std::endian::little, "blocks are read as little-endian words");

constexpr size_t kWords = kMemoryProofBlockBytes / 8;
constexpr size_t kHash = 32;
using Hash = std::array<unsigned char, kHash>;

// One SHA-256 context reused for many small messages: OpenSSL 3 pays a lookup per one-shot
// call, which a million leaves would feel.
class Sha256 {
 public:
  Sha256() : md_(EVP_MD_fetch(nullptr, "SHA256", nullptr)), ctx_(EVP_MD_CTX_new()) {
    if (!md_ || !ctx_) throw Error("memory proof: SHA-256 is unavailable (OpenSSL)");
  }
  ~Sha256() {
    EVP_MD_CTX_free(ctx_);
    EVP_MD_free(md_);
  }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  Sha256& begin() {
    if (EVP_DigestInit_ex2(ctx_, md_, nullptr) != 1) throw Error("memory proof: SHA-256 failed (OpenSSL)");
    return *this;
  }
  Sha256& add(const void* p, size_t n) {
    if (EVP_DigestUpdate(ctx_, p, n) != 1) throw Error("memory proof: SHA-256 failed (OpenSSL)");
    return *this;
  }
  Hash end() {
    Hash h;
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_, h.data(), &len) != 1 || len != kHash) throw Error("memory proof: SHA-256 failed (OpenSSL)");
    return h;
  }

 private:
  EVP_MD* md_;
  EVP_MD_CTX* ctx_;
};

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t le64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Block 0: the seed, expanded.
void first_block(const std::string& seed, uint64_t* out) {
  for (size_t k = 0; k < kWords; ++k) out[k] = splitmix(le64(reinterpret_cast<const unsigned char*>(seed.data()) + 8 * (k % 4)) + k);
}

// Which earlier block block i reads: named by the block before it, so it is known only once
// that block exists.
uint64_t read_index(const uint64_t* prev, uint64_t i) { return prev[0] % i; }

// block i = mix(block i−1 ⊕ block j). Four chains of multiply–rotate run side by side over the
// words (the fill's speed is this function's); the first pass's four ends are folded into one
// value that seeds the second, so every output word depends on every input word and on i — no
// part of a block can be made from part of its inputs.
void mix(const uint64_t* prev, const uint64_t* read, uint64_t i, uint64_t* out) {
  constexpr uint64_t kMul = 0xBF58476D1CE4E5B9ULL;
  for (size_t k = 0; k < kWords; ++k) out[k] = prev[k] ^ read[k];
  uint64_t a[4];
  for (int l = 0; l < 4; ++l) a[l] = splitmix(i * 4 + l);
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < kWords; k += 4)
      for (size_t l = 0; l < 4; ++l) {
        a[l] = rotl(a[l] ^ out[k + l], 29) * kMul + k;
        out[k + l] ^= a[l];
      }
    const uint64_t all = splitmix(a[0] ^ rotl(a[1], 16) ^ rotl(a[2], 32) ^ rotl(a[3], 48));
    for (int l = 0; l < 4; ++l) a[l] = all + static_cast<uint64_t>(l);
  }
}

Hash leaf_hash(Sha256& sha, uint64_t index, const void* block) {
  const unsigned char tag = 0;
  return sha.begin().add(&tag, 1).add(&index, 8).add(block, kMemoryProofBlockBytes).end();
}

Hash node_hash(Sha256& sha, const Hash& left, const Hash& right) {
  const unsigned char tag = 1;
  return sha.begin().add(&tag, 1).add(left.data(), kHash).add(right.data(), kHash).end();
}

// Levels of the Merkle tree, leaves first; a level's last node without a sibling pairs with
// zeros.
int depth_of(uint64_t n) {
  int d = 0;
  for (uint64_t m = n; m > 1; m = (m + 1) / 2) ++d;
  return d;
}

std::string raw_from_hex(const nlohmann::json& j, const char* field, size_t bytes) {
  std::string out;
  if (!j.is_string() || !from_hex(j.get<std::string>(), out) || out.size() != bytes)
    throw Error(std::string("memory check: '") + field + "' must be " + std::to_string(2 * bytes) + " hex digits");
  return out;
}

}  // namespace

struct MemoryFill::State {
  MemoryChallenge c;
  uint64_t kept = 0;
  std::unique_ptr<HugeBuffer> mem;
  std::vector<std::vector<Hash>> levels;  // leaves first, the root last
  std::string root;
  double fill_s = 0;
  const uint64_t* block(uint64_t i) const { return reinterpret_cast<const uint64_t*>(mem->data()) + i * kWords; }
  uint64_t* block(uint64_t i) { return reinterpret_cast<uint64_t*>(mem->data()) + i * kWords; }
};

MemoryFill::MemoryFill(const MemoryChallenge& c, const std::function<bool()>& cancelled, uint64_t keep_blocks)
    : s_(std::make_unique<State>()) {
  std::string seed;
  if (!from_hex(c.seed, seed) || seed.size() != kHash) throw Error("memory check: the challenge's seed is not 64 hex digits");
  if (c.blocks < 2) throw Error("memory check: the challenge asks for fewer than 2 blocks");
  const auto t0 = std::chrono::steady_clock::now();
  State& s = *s_;
  s.c = c;
  const uint64_t n = c.blocks;
  s.kept = std::min(keep_blocks, n);
  try {
    s.mem = std::make_unique<HugeBuffer>(s.kept * kMemoryProofBlockBytes);
    s.levels.assign(1, std::vector<Hash>(n));
  } catch (const std::bad_alloc&) {
    throw Error("memory check: cannot allocate " + std::to_string(memory_fill_bytes(c) >> 20) + " MiB");
  }
  first_block(seed, s.block(0));
  for (uint64_t i = 1; i < s.kept; ++i) {
    if ((i & 0xffff) == 0 && cancelled && cancelled()) throw Error("memory check: stopped");
    mix(s.block(i - 1), s.block(read_index(s.block(i - 1), i)), i, s.block(i));
  }
  // Leaves, on every core: the fill is one chain, hashing is not.
  const std::vector<uint64_t> zeros(kWords, 0);  // the blocks a node without the memory skipped
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      Sha256 sha;
      for (uint64_t i = t; i < n; i += threads) s.levels[0][i] = leaf_hash(sha, i, i < s.kept ? s.block(i) : zeros.data());
    });
  for (auto& th : pool) th.join();
  if (cancelled && cancelled()) throw Error("memory check: stopped");
  Sha256 sha;
  const Hash none{};
  while (s.levels.back().size() > 1) {
    const std::vector<Hash>& below = s.levels.back();
    std::vector<Hash> up((below.size() + 1) / 2);
    for (size_t k = 0; k < up.size(); ++k) up[k] = node_hash(sha, below[2 * k], 2 * k + 1 < below.size() ? below[2 * k + 1] : none);
    s.levels.push_back(std::move(up));
  }
  s.root.assign(reinterpret_cast<const char*>(s.levels.back()[0].data()), kHash);
  s.fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

MemoryFill::~MemoryFill() = default;
const std::string& MemoryFill::root() const { return s_->root; }
double MemoryFill::fill_s() const { return s_->fill_s; }

MemoryProof MemoryFill::open(const std::vector<uint64_t>& probes) const {
  const State& s = *s_;
  const Hash none{};
  auto open_one = [&](uint64_t i) {
    MemoryOpening o;
    o.index = i;
    o.block = i < s.kept ? std::string(reinterpret_cast<const char*>(s.block(i)), kMemoryProofBlockBytes)
                         : std::string(kMemoryProofBlockBytes, '\0');
    uint64_t at = i;
    for (size_t l = 0; l + 1 < s.levels.size(); ++l, at /= 2) {
      const uint64_t sib = at ^ 1;
      const Hash& h = sib < s.levels[l].size() ? s.levels[l][sib] : none;
      o.path.emplace_back(reinterpret_cast<const char*>(h.data()), kHash);
    }
    return o;
  };
  MemoryProof p;
  p.seed = s.c.seed;
  p.root = s.root;
  for (uint64_t i : probes) {
    if (i < 1 || i >= s.c.blocks) throw Error("memory check: probe " + std::to_string(i) + " is outside the blocks");
    p.openings.push_back(open_one(i));
    p.openings.push_back(open_one(i - 1));
    p.openings.push_back(open_one(i - 1 < s.kept ? read_index(s.block(i - 1), i) : 0));
  }
  return p;
}

uint64_t memory_fill_bytes(const MemoryChallenge& c) {
  // The blocks, the leaf hashes and every level above them (about as many again).
  return c.bytes() + 2 * c.blocks * kHash;
}

std::vector<uint64_t> draw_memory_probes(const MemoryChallenge& c) {
  std::vector<uint64_t> out;
  for (int t = 0; t < c.probes; ++t) {
    std::string r;
    from_hex(random_hex(8), r);
    out.push_back(1 + le64(reinterpret_cast<const unsigned char*>(r.data())) % (c.blocks - 1));
  }
  return out;
}

std::string check_memory_proof(const MemoryChallenge& c, const std::string& root, const std::vector<uint64_t>& probes,
                               const MemoryProof& p) {
  std::string seed;
  if (!from_hex(c.seed, seed) || seed.size() != kHash || c.blocks < 2 || root.size() != kHash)
    return "the challenge itself is malformed";
  if (p.seed != c.seed) return "it answers another challenge (seed " + p.seed.substr(0, 16) + "…)";
  if (p.root != root) return "its root is not the one it committed to";
  if (p.openings.size() != 3 * probes.size())
    return std::to_string(p.openings.size()) + " openings, not 3 for each of the " + std::to_string(probes.size()) + " probes";
  Sha256 sha;
  const int depth = depth_of(c.blocks);
  auto words = [](const MemoryOpening& o) {
    std::array<uint64_t, kWords> w;
    std::memcpy(w.data(), o.block.data(), kMemoryProofBlockBytes);
    return w;
  };
  for (size_t t = 0; t < probes.size(); ++t) {
    const MemoryOpening &self = p.openings[3 * t], &prev = p.openings[3 * t + 1], &read = p.openings[3 * t + 2];
    const std::string where = "probe " + std::to_string(t) + " (block " + std::to_string(probes[t]) + ")";
    if (probes[t] < 1 || probes[t] >= c.blocks) return where + ": outside the blocks";
    for (const MemoryOpening* o : {&self, &prev, &read}) {
      if (o->block.size() != kMemoryProofBlockBytes) return where + ": an opened block is not 1 KiB";
      if (o->path.size() != static_cast<size_t>(depth) || o->index >= c.blocks)
        return where + ": block " + std::to_string(o->index) + "'s path has the wrong length or index";
      Hash h = leaf_hash(sha, o->index, o->block.data());
      uint64_t at = o->index;
      for (const std::string& s : o->path) {
        if (s.size() != kHash) return where + ": a path hash is not 32 bytes";
        Hash sib;
        std::memcpy(sib.data(), s.data(), kHash);
        h = (at & 1) ? node_hash(sha, sib, h) : node_hash(sha, h, sib);
        at /= 2;
      }
      if (std::memcmp(h.data(), p.root.data(), kHash) != 0)
        return where + ": block " + std::to_string(o->index) + " is not the one the root commits to";
    }
    const uint64_t i = probes[t];
    const auto pw = words(prev), rw = words(read), sw = words(self);
    if (self.index != i || prev.index != i - 1 || read.index != read_index(pw.data(), i))
      return where + ": the opened blocks are not the probe's, its predecessor's and the one it reads";
    std::array<uint64_t, kWords> expect;
    for (const MemoryOpening* o : {&prev, &read})
      if (o->index == 0) {
        first_block(seed, expect.data());
        if (words(*o) != expect) return where + ": block 0 is not the seed's";
      }
    mix(pw.data(), rw.data(), i, expect.data());
    if (sw != expect)
      return where + ": block " + std::to_string(i) + " is not what blocks " + std::to_string(i - 1) + " and " +
             std::to_string(read.index) + " make";
  }
  return {};
}

nlohmann::json to_json(const MemoryChallenge& c) {
  return {{"seed", c.seed}, {"blocks", c.blocks}, {"block_bytes", kMemoryProofBlockBytes},
          {"probes", c.probes}, {"issued_ms", c.issued_ms}, {"due_ms", c.due_ms}};
}

MemoryChallenge memory_challenge_from_json(const nlohmann::json& j) {
  const char* what = "memory challenge";
  MemoryChallenge c;
  c.seed = required_field<std::string>(j, what, "seed");
  std::string raw;
  if (!from_hex(c.seed, raw) || raw.size() != kHash) throw Error("memory challenge: 'seed' must be 64 hex digits");
  c.blocks = required_field<uint64_t>(j, what, "blocks");
  if (required_field<uint64_t>(j, what, "block_bytes") != kMemoryProofBlockBytes)
    throw Error("memory challenge: blocks of " + std::to_string(required_field<uint64_t>(j, what, "block_bytes")) +
                " bytes (this node makes 1024-byte blocks: update it)");
  c.probes = required_field<int>(j, what, "probes");
  c.issued_ms = required_field<int64_t>(j, what, "issued_ms");
  c.due_ms = required_field<int64_t>(j, what, "due_ms");
  if (c.blocks < 2 || c.blocks > (uint64_t{1} << 40) || c.probes < 1 || c.probes > 1024)
    throw Error("memory challenge: 'blocks' must be within [2, 2^40] and 'probes' within [1, 1024]");
  return c;
}

nlohmann::json to_json(const MemoryProof& p) {
  auto hex = [](const std::string& raw) { return to_hex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size()); };
  nlohmann::json openings = nlohmann::json::array();
  for (const MemoryOpening& o : p.openings) {
    nlohmann::json path = nlohmann::json::array();
    for (const std::string& s : o.path) path.push_back(hex(s));
    openings.push_back({{"index", o.index}, {"block", hex(o.block)}, {"path", std::move(path)}});
  }
  return {{"seed", p.seed}, {"root", hex(p.root)}, {"openings", std::move(openings)}};
}

MemoryProof memory_proof_from_json(const nlohmann::json& j) {
  const char* what = "memory proof";
  MemoryProof p;
  p.seed = required_field<std::string>(j, what, "seed");
  p.root = raw_from_hex(j.value("root", nlohmann::json()), "root", kHash);
  const auto openings = required_field<nlohmann::json>(j, what, "openings");
  if (!openings.is_array() || openings.size() > 3 * 1024) throw Error("memory proof: 'openings' must be an array of at most 3072");
  for (const nlohmann::json& o : openings) {
    MemoryOpening m;
    m.index = required_field<uint64_t>(o, "memory proof opening", "index");
    m.block = raw_from_hex(o.value("block", nlohmann::json()), "block", kMemoryProofBlockBytes);
    const auto path = required_field<nlohmann::json>(o, "memory proof opening", "path");
    if (!path.is_array() || path.size() > 64) throw Error("memory proof: a 'path' must be an array of at most 64 hashes");
    for (const nlohmann::json& h : path) m.path.push_back(raw_from_hex(h, "path", kHash));
    p.openings.push_back(std::move(m));
  }
  return p;
}

}  // namespace orchard::protocol

namespace orchard::protocol {

std::string root_hex(const std::string& root) {
  return to_hex(reinterpret_cast<const unsigned char*>(root.data()), root.size());
}

std::string root_from_hex(const nlohmann::json& j, const char* field) { return raw_from_hex(j, field, kHash); }

nlohmann::json probes_to_json(const std::vector<uint64_t>& probes) { return probes; }

std::vector<uint64_t> probes_from_json(const nlohmann::json& j) {
  if (!j.is_array() || j.size() > 1024) throw Error("memory check: 'probes' must be an array of at most 1024 block indices");
  std::vector<uint64_t> out;
  for (const nlohmann::json& v : j) {
    if (!v.is_number_unsigned()) throw Error("memory check: 'probes' must hold block indices");
    out.push_back(v.get<uint64_t>());
  }
  return out;
}

}  // namespace orchard::protocol
