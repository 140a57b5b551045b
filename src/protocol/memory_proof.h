#pragma once
// Proof that a node holds the memory it claims (docs/verification.md, "Claimed memory").
//
// The coordinator sends a fresh seed and a size. The node fills that many 1 KiB blocks in RAM,
// each mixed from the block before it and an earlier block that one names (data-dependent, as
// in scrypt's fill), so each step reads a block chosen among all before it — a cache miss from
// DRAM, a random read a thousand times slower from swap or a disk — and commits to the blocks
// with a Merkle root before the fill's deadline. Only then does the coordinator draw the probes,
// at random; the node opens each probed block, the one before it and the one it read, with
// their Merkle paths, within seconds. The coordinator checks the paths and recomputes each
// probed block: microseconds, whatever the size.
//
// What it proves: a node that committed to blocks of which a share b are wrong passes k probes
// with probability (1 − b)^k, and it cannot retry with other probes (they come after the root).
// A node keeping only part of the blocks must recompute the others — during the fill, whenever
// a step reads one, and again for the probes — which costs time the deadline bounds; how much
// memory that saves a machine fast enough to stay within the deadline is the check's limit
// (docs/verification.md). It does not prove the memory stays free afterwards.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace orchard::protocol {

constexpr uint64_t kMemoryProofBlockBytes = 1024;

struct MemoryChallenge {
  std::string seed;       // 64 hex digits, fresh per challenge
  uint64_t blocks = 0;    // within [2, 2^40]; the fill holds blocks × 1 KiB
  int probes = 32;        // how many blocks the coordinator will probe
  int64_t issued_ms = 0;  // the coordinator's clock: when it was sent and when the root is due
  int64_t due_ms = 0;
  uint64_t bytes() const { return blocks * kMemoryProofBlockBytes; }
};

// One block and the sibling hashes from its leaf up to the root.
struct MemoryOpening {
  uint64_t index = 0;
  std::string block;              // kMemoryProofBlockBytes raw bytes
  std::vector<std::string> path;  // 32-byte hashes, the leaf's sibling first
};

// The node's answer to the probes: per probe, the block, its predecessor and the block it read.
struct MemoryProof {
  std::string seed;                     // the challenge answered
  std::string root;                     // 32-byte Merkle root, as committed
  std::vector<MemoryOpening> openings;
};

// The filled blocks and their Merkle tree, held by the node from its commitment until it has
// opened the probes. Memory: the blocks plus about 6 % for the tree.
class MemoryFill {
 public:
  // Fills the blocks. Throws orchard::Error when the memory cannot be allocated or `cancelled`
  // (polled between steps) returns true. `keep_blocks` (tests of the check, a cheating node):
  // blocks from this index on are not computed but zeros, as a node without the memory might send.
  MemoryFill(const MemoryChallenge& c, const std::function<bool()>& cancelled = {}, uint64_t keep_blocks = UINT64_MAX);
  ~MemoryFill();
  MemoryFill(const MemoryFill&) = delete;
  MemoryFill& operator=(const MemoryFill&) = delete;

  const std::string& root() const;  // 32 raw bytes
  double fill_s() const;            // how long the fill and the tree took
  // Opens the probed blocks (each index in [1, blocks)); throws orchard::Error for another index.
  MemoryProof open(const std::vector<uint64_t>& probes) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// What the tree adds to a fill's blocks, for a node deciding whether it can hold a check.
uint64_t memory_fill_bytes(const MemoryChallenge& c);

// `count` probes drawn uniformly from [1, blocks) with the system's secure random generator.
std::vector<uint64_t> draw_memory_probes(const MemoryChallenge& c);

// Empty when `p` opens `probes` under the committed `root`; else what is wrong ("probe 3:
// block 81234 is not what blocks 81233 and 5120 make").
std::string check_memory_proof(const MemoryChallenge& c, const std::string& root, const std::vector<uint64_t>& probes,
                               const MemoryProof& p);

// JSON: binary fields as lowercase hex. *_from_json throw orchard::Error naming the field.
nlohmann::json to_json(const MemoryChallenge& c);
MemoryChallenge memory_challenge_from_json(const nlohmann::json& j);
nlohmann::json to_json(const MemoryProof& p);
MemoryProof memory_proof_from_json(const nlohmann::json& j);
// A 32-byte root as 64 hex digits and back (throws orchard::Error naming `field`).
std::string root_hex(const std::string& root);
std::string root_from_hex(const nlohmann::json& j, const char* field);
// Probe lists (at most 1024 indices).
nlohmann::json probes_to_json(const std::vector<uint64_t>& probes);
std::vector<uint64_t> probes_from_json(const nlohmann::json& j);

}  // namespace orchard::protocol
