// The memory check (protocol/memory_proof.h): an honest fill passes; a node that skipped the
// tail of the blocks, changed one, answered another challenge, opened other blocks than the
// probes drawn after its root or changed the root is refused naming the probe; the JSON round
// trip keeps every byte and refuses malformed input.
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

// Fills and opens the probes the checker drew after the root, as the coordinator and node do.
struct Answered {
  std::string root;
  std::vector<uint64_t> probes;
  MemoryProof proof;
};
Answered answer(const MemoryChallenge& c, uint64_t keep = UINT64_MAX) {
  const MemoryFill fill(c, {}, keep);
  Answered a{fill.root(), draw_memory_probes(c), {}};
  a.proof = fill.open(a.probes);
  return a;
}

TEST(MemoryProof, AnHonestFillPassesAndIsTheSameForTheSameSeed) {
  for (uint64_t blocks : {2u, 3u, 1000u, 4096u, 12345u}) {
    const MemoryChallenge c = challenge(blocks);
    const Answered a = answer(c);
    EXPECT_EQ(check_memory_proof(c, a.root, a.probes, a.proof), "") << blocks << " blocks";
    EXPECT_EQ(a.proof.openings.size(), 3u * 32);
    EXPECT_EQ(MemoryFill(c).root(), a.root) << "deterministic";
    MemoryChallenge other = c;
    other.seed = random_hex(32);
    EXPECT_NE(MemoryFill(other).root(), a.root);
  }
}

TEST(MemoryProof, ProbesAreDrawnOverTheBlocksAndOutsideOnesAreRefused) {
  const MemoryChallenge c = challenge(1 << 16, 64);
  const std::vector<uint64_t> a = draw_memory_probes(c), b = draw_memory_probes(c);
  ASSERT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  std::set<uint64_t> distinct(a.begin(), a.end());
  EXPECT_GT(distinct.size(), 60u);
  for (uint64_t i : a) EXPECT_TRUE(i >= 1 && i < c.blocks);
  const MemoryFill fill(challenge(100));
  EXPECT_THROW(fill.open({0}), Error);
  EXPECT_THROW(fill.open({100}), Error);
}

// What a node without the memory could send: the first blocks computed, the rest zeros. With
// half of them skipped, 32 probes all land in the computed half with probability 2^-32, and the
// node cannot draw others: they come after its root.
TEST(MemoryProof, ANodeThatSkippedBlocksIsCaught) {
  const MemoryChallenge c = challenge(1 << 14);
  const Answered a = answer(c, c.blocks / 2);
  const std::string why = check_memory_proof(c, a.root, a.probes, a.proof);
  EXPECT_NE(why.find("is not what blocks"), std::string::npos) << why;
  EXPECT_NE(why.find("probe "), std::string::npos) << why;
}

TEST(MemoryProof, AChangedBlockPathRootSeedOrIndexIsCaught) {
  const MemoryChallenge c = challenge(5000);
  const Answered honest = answer(c);
  auto check = [&](const MemoryProof& p) { return check_memory_proof(c, honest.root, honest.probes, p); };
  {
    MemoryProof p = honest.proof;
    p.openings[0].block[100] ^= 1;
    EXPECT_NE(check(p).find("not the one the root commits to"), std::string::npos) << check(p);
  }
  {
    MemoryProof p = honest.proof;
    p.openings[4].path[2][0] ^= 1;
    EXPECT_NE(check(p).find("not the one the root commits to"), std::string::npos);
  }
  {
    MemoryProof p = honest.proof;
    p.root[0] ^= 1;
    EXPECT_NE(check(p).find("not the one it committed to"), std::string::npos);
  }
  {
    MemoryChallenge other = c;
    other.seed = random_hex(32);
    EXPECT_NE(check_memory_proof(other, honest.root, honest.probes, honest.proof).find("another challenge"), std::string::npos);
  }
  {
    MemoryProof p = honest.proof;
    std::swap(p.openings[1], p.openings[2]);  // the predecessor and the read block swapped
    EXPECT_NE(check(p), "");
  }
  {
    MemoryProof p = honest.proof;
    p.openings.pop_back();
    EXPECT_NE(check(p).find("openings"), std::string::npos);
  }
  {
    std::vector<uint64_t> other = honest.probes;  // the proof opens the node's choice, not the checker's
    other[0] = other[0] % 4000 + 1;
    EXPECT_NE(check_memory_proof(c, honest.root, other, honest.proof), "");
  }
}

TEST(MemoryProof, JsonRoundTripsAndMalformedInputIsAnErrorNamingTheField) {
  const MemoryChallenge c = challenge(3000);
  const MemoryChallenge c2 = memory_challenge_from_json(nlohmann::json::parse(to_json(c).dump()));
  EXPECT_EQ(c2.seed, c.seed);
  EXPECT_EQ(c2.blocks, c.blocks);
  EXPECT_EQ(c2.probes, c.probes);
  EXPECT_EQ(c2.due_ms, c.due_ms);
  const Answered a = answer(c);
  const MemoryProof& p = a.proof;
  const MemoryProof p2 = memory_proof_from_json(nlohmann::json::parse(to_json(p).dump()));
  EXPECT_EQ(check_memory_proof(c, a.root, a.probes, p2), "");
  EXPECT_EQ(p2.root, p.root);
  EXPECT_EQ(probes_from_json(nlohmann::json::parse(probes_to_json(a.probes).dump())), a.probes);
  EXPECT_EQ(root_from_hex(root_hex(a.root), "root"), a.root);

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
  EXPECT_NE(error_of([&] { probes_from_json(nlohmann::json::parse("[1, -2]")); }).find("'probes'"), std::string::npos);
  EXPECT_NE(error_of([&] { probes_from_json(nlohmann::json(std::vector<int>(1025, 1))); }).find("'probes'"), std::string::npos);
}

// Not an assertion on time (benchmarks hold those): how long a 64 MiB proof takes here, and
// how large its answer is, for docs/verification.md.
TEST(MemoryProof, SixtyFourMebibytesFillAndAnswer) {
  const MemoryChallenge c = challenge((64u << 20) / kMemoryProofBlockBytes);
  const auto t0 = std::chrono::steady_clock::now();
  const Answered a = answer(c);
  const MemoryProof& p = a.proof;
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(check_memory_proof(c, a.root, a.probes, p), "");
  const auto t2 = std::chrono::steady_clock::now();
  std::printf("64 MiB: proved in %.3f s, checked in %.4f s, answer %zu bytes of JSON\n",
              std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
              to_json(p).dump().size());
}

}  // namespace
}  // namespace orchard::protocol
