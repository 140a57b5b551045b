// The memory proof (protocol/memory_proof.h): an honest fill passes; a node that skipped the
// tail of the blocks, changed one, answered another challenge or opened the wrong blocks is
// refused naming the probe; the JSON round trip keeps every byte and refuses malformed input.
#include "protocol/memory_proof.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "protocol/secure_random.h"
#include "tensor/error.h"

namespace orchard::protocol {
namespace {

MemoryChallenge challenge(uint64_t blocks, int probes = 32) {
  MemoryChallenge c;
  c.seed = random_hex(32);
  c.blocks = blocks;
  c.probes = probes;
  c.issued_ms = 1'700'000'000'000;
  c.due_ms = c.issued_ms + 60'000;
  return c;
}

TEST(MemoryProof, AnHonestFillPassesAndIsTheSameForTheSameSeed) {
  for (uint64_t blocks : {2u, 3u, 1000u, 4096u, 12345u}) {
    const MemoryChallenge c = challenge(blocks);
    const MemoryProof p = prove_memory(c);
    EXPECT_EQ(check_memory_proof(c, p), "") << blocks << " blocks";
    EXPECT_EQ(p.openings.size(), 3u * 32);
    EXPECT_EQ(prove_memory(c).root, p.root) << "deterministic";
    MemoryChallenge other = c;
    other.seed = random_hex(32);
    EXPECT_NE(prove_memory(other).root, p.root);
  }
}

TEST(MemoryProof, ProbesSpreadOverTheBlocksAndFollowTheRoot) {
  const MemoryChallenge c = challenge(1 << 16, 64);
  const std::vector<uint64_t> a = memory_probes(c, std::string(32, 'a')), b = memory_probes(c, std::string(32, 'b'));
  ASSERT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  std::set<uint64_t> distinct(a.begin(), a.end());
  EXPECT_GT(distinct.size(), 60u);
  for (uint64_t i : a) EXPECT_TRUE(i >= 1 && i < c.blocks);
}

// What a node without the memory could send: the first blocks computed, the rest zeros. With
// half of them skipped, 32 probes all land in the computed half with probability 2^-32.
TEST(MemoryProof, ANodeThatSkippedBlocksIsCaught) {
  const MemoryChallenge c = challenge(1 << 14);
  const MemoryProof p = prove_memory(c, {}, c.blocks / 2);
  const std::string why = check_memory_proof(c, p);
  EXPECT_NE(why.find("is not what blocks"), std::string::npos) << why;
  EXPECT_NE(why.find("probe "), std::string::npos) << why;
}

TEST(MemoryProof, AChangedBlockPathSeedOrIndexIsCaught) {
  const MemoryChallenge c = challenge(5000);
  const MemoryProof honest = prove_memory(c);
  {
    MemoryProof p = honest;
    p.openings[0].block[100] ^= 1;
    EXPECT_NE(check_memory_proof(c, p).find("not the one the root commits to"), std::string::npos) << check_memory_proof(c, p);
  }
  {
    MemoryProof p = honest;
    p.openings[4].path[2][0] ^= 1;
    EXPECT_NE(check_memory_proof(c, p).find("not the one the root commits to"), std::string::npos);
  }
  {
    MemoryProof p = honest;
    p.root[0] ^= 1;  // other probes then, and no path reaches this root
    EXPECT_NE(check_memory_proof(c, p), "");
  }
  {
    MemoryChallenge other = c;
    other.seed = random_hex(32);
    EXPECT_NE(check_memory_proof(other, honest).find("another challenge"), std::string::npos);
  }
  {
    MemoryProof p = honest;
    std::swap(p.openings[1], p.openings[2]);  // the predecessor and the read block swapped
    EXPECT_NE(check_memory_proof(c, p), "");
  }
  {
    MemoryProof p = honest;
    p.openings.pop_back();
    EXPECT_NE(check_memory_proof(c, p).find("openings"), std::string::npos);
  }
}

TEST(MemoryProof, JsonRoundTripsAndMalformedInputIsAnErrorNamingTheField) {
  const MemoryChallenge c = challenge(3000);
  const MemoryChallenge c2 = memory_challenge_from_json(nlohmann::json::parse(to_json(c).dump()));
  EXPECT_EQ(c2.seed, c.seed);
  EXPECT_EQ(c2.blocks, c.blocks);
  EXPECT_EQ(c2.probes, c.probes);
  EXPECT_EQ(c2.due_ms, c.due_ms);
  const MemoryProof p = prove_memory(c);
  const MemoryProof p2 = memory_proof_from_json(nlohmann::json::parse(to_json(p).dump()));
  EXPECT_EQ(check_memory_proof(c, p2), "");
  EXPECT_EQ(p2.root, p.root);

  auto error_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  nlohmann::json bad = to_json(c);
  bad["blocks"] = 1;
  EXPECT_NE(error_of([&] { memory_challenge_from_json(bad); }).find("'blocks'"), std::string::npos);
  bad = to_json(c);
  bad["block_bytes"] = 4096;
  EXPECT_NE(error_of([&] { memory_challenge_from_json(bad); }).find("update it"), std::string::npos);
  bad = to_json(c);
  bad.erase("seed");
  EXPECT_NE(error_of([&] { memory_challenge_from_json(bad); }).find("'seed' is missing"), std::string::npos);
  nlohmann::json badp = to_json(p);
  badp["openings"][0]["block"] = "abc";
  EXPECT_NE(error_of([&] { memory_proof_from_json(badp); }).find("'block'"), std::string::npos);
  badp = to_json(p);
  badp["root"] = 7;
  EXPECT_NE(error_of([&] { memory_proof_from_json(badp); }).find("'root'"), std::string::npos);
  EXPECT_NE(error_of([&] { memory_proof_from_json(nlohmann::json::array()); }).find("memory proof"), std::string::npos);
}

// Not an assertion on time (benchmarks hold those): how long a 64 MiB proof takes here, and
// how large its answer is, for docs/verification.md.
TEST(MemoryProof, SixtyFourMebibytesFillAndAnswer) {
  const MemoryChallenge c = challenge((64u << 20) / kMemoryProofBlockBytes);
  const auto t0 = std::chrono::steady_clock::now();
  const MemoryProof p = prove_memory(c);
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(check_memory_proof(c, p), "");
  const auto t2 = std::chrono::steady_clock::now();
  std::printf("64 MiB: proved in %.3f s, checked in %.4f s, answer %zu bytes of JSON\n",
              std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
              to_json(p).dump().size());
}

}  // namespace
}  // namespace orchard::protocol
