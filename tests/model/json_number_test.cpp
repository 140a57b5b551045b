// exact_get: integers from untrusted JSON fit exactly or are refused with the
// exceptions nlohmann's own get<T>() throws for a wrong type.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "model/json_number.h"

namespace orchard {
namespace {

using nlohmann::json;

TEST(JsonNumber, IntegersThatFitAreReadExactly) {
  EXPECT_EQ(exact_get<int>(json(42)), 42);
  EXPECT_EQ(exact_get<int>(json(-7)), -7);
  EXPECT_EQ(exact_get<int>(json(4.0)), 4);
  EXPECT_EQ(exact_get<int>(json(2147483647)), 2147483647);
  EXPECT_EQ(exact_get<int>(json(-2147483648.0)), INT32_MIN);
  EXPECT_EQ(exact_get<uint64_t>(json(UINT64_MAX)), UINT64_MAX);
  EXPECT_EQ(exact_get<int64_t>(json(INT64_MIN)), INT64_MIN);
  EXPECT_EQ(exact_get<std::vector<int32_t>>(json::parse("[1, -2, 3.0]")), (std::vector<int32_t>{1, -2, 3}));
  // Other types pass through to get<T>().
  EXPECT_EQ(exact_get<double>(json(1e54)), 1e54);
  EXPECT_EQ(exact_get<std::string>(json("x")), "x");
}

TEST(JsonNumber, NumbersThatDoNotFitAreOutOfRange) {
  EXPECT_THROW(exact_get<int>(json::parse("1e54")), json::out_of_range);  // the fuzzer's find: UB in get<int>()
  EXPECT_THROW(exact_get<int>(json(2147483648.0)), json::out_of_range);
  EXPECT_THROW(exact_get<int>(json(int64_t{1} << 40)), json::out_of_range);
  EXPECT_THROW(exact_get<int>(json(uint64_t{1} << 63)), json::out_of_range);
  EXPECT_THROW(exact_get<int64_t>(json(UINT64_MAX)), json::out_of_range);
  EXPECT_THROW(exact_get<int64_t>(json(9223372036854775808.0)), json::out_of_range);  // 2^63
  EXPECT_THROW(exact_get<uint32_t>(json(-1)), json::out_of_range);
  EXPECT_THROW(exact_get<uint64_t>(json(-1.0)), json::out_of_range);
  EXPECT_THROW(exact_get<std::vector<int32_t>>(json::parse("[1, 1e10]")), json::out_of_range);
}

TEST(JsonNumber, FractionsAndNonNumbersAreTypeErrors) {
  EXPECT_THROW(exact_get<int>(json(2.5)), json::type_error);
  EXPECT_THROW(exact_get<int>(json("3")), json::type_error);
  EXPECT_THROW(exact_get<int>(json(true)), json::type_error);
  EXPECT_THROW(exact_get<int>(json(nullptr)), json::type_error);
  EXPECT_THROW(exact_get<std::vector<int>>(json(3)), json::type_error);
  EXPECT_THROW(exact_get<std::vector<int>>(json::parse("[1, \"2\"]")), json::type_error);
  // Infinity and NaN cannot come from parse(), but a json built in code can hold them.
  EXPECT_THROW(exact_get<int>(json(std::numeric_limits<double>::infinity())), json::type_error);
  EXPECT_THROW(exact_get<int>(json(std::numeric_limits<double>::quiet_NaN())), json::type_error);
}

}  // namespace
}  // namespace orchard
