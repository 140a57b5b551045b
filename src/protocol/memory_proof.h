#pragma once
// Proof that a node holds the memory it claims (docs/verification.md, "Claimed memory").
//
// The coordinator sends a fresh seed and a size. The node fills that many 1 KiB blocks in RAM,
// each mixed from the block before it and an earlier block that one names (data-dependent, as
// in scrypt's fill): computing block i needs every block it reads, so a node cannot keep a few
// and recompute the rest on demand, and keeping them on disk makes each step a random read
// (about a thousand times slower than DRAM). It commits to the blocks with a Merkle root, and
// the root itself picks which blocks it must open (Fiat–Shamir: changing a block changes the
// probes, so a node cannot know them before it has committed to everything). For each probe i
// the answer carries blocks i, i − 1 and the one i read, each with its Merkle path; the
// coordinator checks the paths and recomputes block i — microseconds, whatever the size.
//
// What it proves: the node produced the committed blocks before the deadline, which a node
// without that much memory cannot do in time; a node that skipped a share s of the blocks
// passes k probes with probability about (1 − s)^k. What it does not: that the memory stays
// free afterwards.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace orchard::protocol {

constexpr uint64_t kMemoryProofBlockBytes = 1024;

struct MemoryChallenge {
  std::string seed;       // 64 hex digits, fresh per challenge
  uint64_t blocks = 0;    // ≥ 2; the proof fills blocks × 1 KiB
  int probes = 32;        // how many blocks the answer opens
  int64_t issued_ms = 0;  // the coordinator's clock: when it was sent and when the answer is due
  int64_t due_ms = 0;
  uint64_t bytes() const { return blocks * kMemoryProofBlockBytes; }
};

// One block and the sibling hashes from its leaf up to the root.
struct MemoryOpening {
  uint64_t index = 0;
  std::string block;              // kMemoryProofBlockBytes raw bytes
  std::vector<std::string> path;  // 32-byte hashes, the leaf's sibling first
};

struct MemoryProof {
  std::string seed;                     // the challenge answered
  std::string root;                     // 32-byte Merkle root
  std::vector<MemoryOpening> openings;  // per probe: the block, its predecessor, the block it read
  double fill_s = 0;                    // the node's own timing, for logs
};

// The probed block indices for a root: `probes` of them in [1, blocks).
std::vector<uint64_t> memory_probes(const MemoryChallenge& c, const std::string& root);

// Fills the blocks and answers. Throws orchard::Error when the memory cannot be allocated;
// `cancelled` is polled between steps (a node told to stop does not finish a long fill).
// `keep_blocks` (tests of the check, a cheating node): blocks from this index on are not
// computed but left zero, as a node without the memory would have to.
MemoryProof prove_memory(const MemoryChallenge& c, const std::function<bool()>& cancelled = {},
                         uint64_t keep_blocks = UINT64_MAX);

// Empty when the proof answers the challenge; else what is wrong with it ("probe 3: block
// 81234 is not what blocks 81233 and 5120 make").
std::string check_memory_proof(const MemoryChallenge& c, const MemoryProof& p);

// JSON: binary fields as lowercase hex. *_from_json throw orchard::Error naming the field.
nlohmann::json to_json(const MemoryChallenge& c);
MemoryChallenge memory_challenge_from_json(const nlohmann::json& j);
nlohmann::json to_json(const MemoryProof& p);
MemoryProof memory_proof_from_json(const nlohmann::json& j);

}  // namespace orchard::protocol
