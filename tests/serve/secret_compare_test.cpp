// API keys are compared without early exit (the time is measured in no test: only the answers).
#include <gtest/gtest.h>

#include "serve/secret_compare.h"

namespace orchard::serve {
namespace {

TEST(SameSecret, EqualOnlyWhenEveryByteAndTheLengthAgree) {
  EXPECT_TRUE(same_secret("sekret-123", "sekret-123"));
  EXPECT_FALSE(same_secret("sekret-124", "sekret-123"));
  EXPECT_FALSE(same_secret("Sekret-123", "sekret-123"));
  EXPECT_FALSE(same_secret("sekret-12", "sekret-123"));
  EXPECT_FALSE(same_secret("sekret-1234", "sekret-123"));
  EXPECT_FALSE(same_secret("", "sekret-123"));
  EXPECT_TRUE(same_secret(std::string_view("a\0b", 3), std::string_view("a\0b", 3)));
  EXPECT_FALSE(same_secret(std::string_view("a\0b", 3), std::string_view("a\0c", 3)));
}

}  // namespace
}  // namespace orchard::serve
