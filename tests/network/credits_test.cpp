// The rate table: size classes, hardware and dedicated multipliers, rounding.
#include "network/protocol_names.h"

#include <gtest/gtest.h>

#include "tensor/error.h"

namespace orchard::network {
namespace {

TEST(Credits, SizeClassBoundaries) {
  EXPECT_EQ(size_class(3'000'000'000ull), SizeClass::Tiny);
  EXPECT_EQ(size_class(3'000'000'001ull), SizeClass::Small);
  EXPECT_EQ(size_class(10'000'000'000ull), SizeClass::Small);
  EXPECT_EQ(size_class(35'000'000'000ull), SizeClass::Medium);
  EXPECT_EQ(size_class(80'000'000'000ull), SizeClass::Large);
  EXPECT_EQ(size_class(405'000'000'000ull), SizeClass::Huge);
}

TEST(Credits, PriceFollowsTheTable) {
  JobUsage u{1000, 1000, SizeClass::Tiny, HardwareClass::Laptop, false};
  EXPECT_EQ(job_credits(u), 50 + 200);
  u.hardware = HardwareClass::Workstation;
  u.dedicated = true;
  EXPECT_EQ(job_credits(u), 563);  // 250 × 1.5 × 1.5 = 562.5, rounded up
  // A generated token costs more than a prompt token, a bigger model more than a smaller one.
  EXPECT_GT(job_credits({0, 1000, SizeClass::Large, HardwareClass::Laptop, false}),
            job_credits({1000, 0, SizeClass::Large, HardwareClass::Laptop, false}));
  EXPECT_GT(job_credits({0, 1000, SizeClass::Huge, HardwareClass::Laptop, false}),
            job_credits({0, 1000, SizeClass::Large, HardwareClass::Laptop, false}));
  EXPECT_EQ(job_credits({1, 0, SizeClass::Tiny, HardwareClass::Laptop, false}), 1);  // any use costs ≥ 1 µc
  EXPECT_EQ(job_credits({0, 0, SizeClass::Huge, HardwareClass::Workstation, true}), 0);
  EXPECT_EQ(parse_hardware_class("cpu"), HardwareClass::Laptop);
  EXPECT_THROW(parse_size_class("enormous"), Error);
}

}  // namespace
}  // namespace orchard::network
