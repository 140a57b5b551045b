#include "protocol/credits.h"

#include <limits>

#include "tensor/error.h"

namespace orchard::protocol {

SizeClass size_class(uint64_t parameters) {
  constexpr uint64_t B = 1'000'000'000ull;
  if (parameters <= 3 * B) return SizeClass::Tiny;
  if (parameters <= 10 * B) return SizeClass::Small;
  if (parameters <= 35 * B) return SizeClass::Medium;
  if (parameters <= 80 * B) return SizeClass::Large;
  return SizeClass::Huge;
}

const char* to_string(SizeClass c) {
  switch (c) {
    case SizeClass::Tiny: return "tiny";
    case SizeClass::Small: return "small";
    case SizeClass::Medium: return "medium";
    case SizeClass::Large: return "large";
    case SizeClass::Huge: return "huge";
  }
  return "?";
}

const char* to_string(HardwareClass c) {
  switch (c) {
    case HardwareClass::Laptop: return "laptop";
    case HardwareClass::Desktop: return "desktop";
    case HardwareClass::Workstation: return "workstation";
  }
  return "?";
}

SizeClass parse_size_class(std::string_view s) {
  for (SizeClass c : {SizeClass::Tiny, SizeClass::Small, SizeClass::Medium, SizeClass::Large, SizeClass::Huge})
    if (s == to_string(c)) return c;
  throw Error("unknown model size class '" + std::string(s) + "' (tiny, small, medium, large, huge)");
}

HardwareClass parse_hardware_class(std::string_view s) {
  if (s == "cpu") return HardwareClass::Laptop;
  for (HardwareClass c : {HardwareClass::Laptop, HardwareClass::Desktop, HardwareClass::Workstation})
    if (s == to_string(c)) return c;
  throw Error("unknown hardware class '" + std::string(s) + "' (cpu, laptop, desktop, workstation)");
}

Rate base_rate(SizeClass c) {
  switch (c) {
    case SizeClass::Tiny: return {50, 200};
    case SizeClass::Small: return {100, 400};
    case SizeClass::Medium: return {250, 1'000};
    case SizeClass::Large: return {500, 2'000};
    case SizeClass::Huge: return {1'000, 4'000};
  }
  return {0, 0};
}

HardwareClass measured_hardware_class(double gbs) {
  if (gbs >= kWorkstationGbs) return HardwareClass::Workstation;
  if (gbs >= kDesktopGbs) return HardwareClass::Desktop;
  return HardwareClass::Laptop;
}

int hardware_percent(HardwareClass c) {
  switch (c) {
    case HardwareClass::Laptop: return 100;
    case HardwareClass::Desktop: return 125;
    case HardwareClass::Workstation: return 150;
  }
  return 100;
}

int64_t job_credits(const JobUsage& u) {
  // 128-bit intermediate: token counts up to 2^64 times rates of a few thousand cannot wrap.
  const Rate r = base_rate(u.size);
  const unsigned __int128 raw = static_cast<unsigned __int128>(u.prompt_tokens) * static_cast<uint64_t>(r.prompt_per_1k) +
                                static_cast<unsigned __int128>(u.generated_tokens) * static_cast<uint64_t>(r.generated_per_1k);
  const unsigned __int128 scaled = raw * static_cast<unsigned>(hardware_percent(u.hardware)) *
                                   static_cast<unsigned>(u.dedicated ? kDedicatedPercent : 100);
  constexpr unsigned __int128 denom = 1000u * 100u * 100u;
  const unsigned __int128 credits = (scaled + denom - 1) / denom;
  if (credits > static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max()))
    throw Error("job price overflows: " + std::to_string(u.prompt_tokens) + " prompt and " +
                std::to_string(u.generated_tokens) + " generated tokens");
  return static_cast<int64_t>(credits);
}

nlohmann::json to_json(const JobUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"generated_tokens", u.generated_tokens},
          {"model_class", to_string(u.size)},
          {"hardware", to_string(u.hardware)},
          {"dedicated", u.dedicated}};
}

}  // namespace orchard::protocol
