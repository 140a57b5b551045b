#pragma once
// The pieces of JSON as grammar rules, each made once per grammar and shared: whitespace,
// strings (well-formed UTF-8, escapes, a length range in characters), integers in a range,
// numbers, any value, any object, and repetitions. The JSON-schema compiler builds on these.
//
// Whitespace between tokens is bounded (20 blanks in a row), and so are digits (20 in an
// integer or a fraction, 2 in an exponent), so a sampled model cannot fill its whole budget with
// blanks or digits, and every number fits a double.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "model/grammar/grammar.h"

namespace orchard {

class JsonRules {
 public:
  static constexpr uint32_t kUnbounded = UINT32_MAX;

  explicit JsonRules(GrammarBuilder& b) : b_(b) {}

  uint32_t ws();
  uint32_t value();   // any JSON value
  uint32_t object();  // any JSON object
  uint32_t array();   // any JSON array
  uint32_t string(uint32_t min_chars = 0, uint32_t max_chars = kUnbounded);
  uint32_t boolean();
  uint32_t null();
  uint32_t integer();  // unbounded (20 digits at most)
  uint32_t number();
  // Integers lo ≤ n ≤ hi; an absent bound is open.
  uint32_t integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);
  // Numbers within [lo, hi] (exclusive where said): whole numbers, and fractions wherever the
  // whole part plus any fraction stays inside; no exponents.
  uint32_t number_range(std::optional<double> lo, bool lo_exclusive, std::optional<double> hi, bool hi_exclusive);
  // A rule matching exactly `text`.
  uint32_t literal(const std::string& text);

  // `item` min..max times (max kUnbounded: any number more).
  GrammarSequence repeat(uint32_t item, uint32_t min, uint32_t max);

  GrammarBuilder& builder() { return b_; }

 private:
  uint32_t memo(const std::string& key) const;
  uint32_t remember(const std::string& key, uint32_t rule);
  uint32_t character();
  uint32_t digit();
  uint32_t digits(uint32_t min, uint32_t max);  // a rule of min..max digits
  uint32_t nonneg_range(uint64_t lo, std::optional<uint64_t> hi);

  GrammarBuilder& b_;
  std::map<std::string, uint32_t> memo_;
};

}  // namespace orchard
