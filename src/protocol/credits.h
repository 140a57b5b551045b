#pragma once
// What a job costs: tokens × a rate by model size and hardware class × a multiplier for a
// dedicated slot. Money is integer micro-credits (1 credit = 1'000'000 µc) everywhere, so two
// machines that price the same job always agree to the last unit.
//
// Base rates, micro-credits per 1,000 tokens (a prompt token is a quarter of a generated one:
// prefill is batched, decoding is one token per step):
//
//   model size (parameters)  prompt   generated
//   tiny    ≤ 3 B                50         200
//   small   ≤ 10 B              100         400
//   medium  ≤ 35 B              250       1'000
//   large   ≤ 80 B              500       2'000
//   huge    > 80 B            1'000       4'000
//
// Hardware class multiplier (percent): laptop (and plain CPU) 100, desktop 125,
// workstation (Ultra-class, big GPUs) 150 — the class the coordinator measured, by the
// memory bandwidth a node delivered on a canary (measured_hardware_class), never the node's
// own label. A dedicated slot (reserved for one client, not shared through the batch) costs
// 150 % of a shared one.
//
//   credits = ceil((prompt × prompt_rate + generated × generated_rate) × hw% × dedicated%
//                  / (1000 × 100 × 100))
//
// Rounded up once, at the end, so a job that used any tokens costs at least 1 µc.
// docs/network.md has the same table; change both together.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace orchard::protocol {

inline constexpr int64_t kMicroPerCredit = 1'000'000;

enum class SizeClass { Tiny, Small, Medium, Large, Huge };
enum class HardwareClass { Laptop, Desktop, Workstation };

// The size class of a model with `parameters` weights (≤3B tiny, ≤10B small, ≤35B medium,
// ≤80B large, else huge).
SizeClass size_class(uint64_t parameters);

const char* to_string(SizeClass c);
const char* to_string(HardwareClass c);
// "tiny".."huge" / "laptop", "cpu" (= laptop), "desktop", "workstation"; throws orchard::Error
// naming the accepted values otherwise.
SizeClass parse_size_class(std::string_view s);
HardwareClass parse_hardware_class(std::string_view s);

struct Rate {
  int64_t prompt_per_1k;     // micro-credits per 1,000 prompt tokens
  int64_t generated_per_1k;  // micro-credits per 1,000 generated tokens
};
Rate base_rate(SizeClass c);
int hardware_percent(HardwareClass c);
// The class of a node that delivered `gbs` GB/s of memory bandwidth: below 100 laptop, below
// 300 desktop, else workstation (an M-series Max or Ultra, a GPU box).
HardwareClass measured_hardware_class(double gbs);
inline constexpr double kDesktopGbs = 100, kWorkstationGbs = 300;
inline constexpr int kDedicatedPercent = 150;

// One finished job, as far as its price goes.
struct JobUsage {
  uint64_t prompt_tokens = 0;
  uint64_t generated_tokens = 0;
  SizeClass size = SizeClass::Tiny;
  HardwareClass hardware = HardwareClass::Laptop;
  bool dedicated = false;
};

// The price of `u` in micro-credits (0 only when no tokens were used). Throws orchard::Error
// when the token counts are so large that the price would not fit in 63 bits.
int64_t job_credits(const JobUsage& u);

// The usage as the ledger entry's details: {"prompt_tokens", "generated_tokens", "model_class",
// "hardware", "dedicated"}.
nlohmann::json to_json(const JobUsage& u);

}  // namespace orchard::protocol
