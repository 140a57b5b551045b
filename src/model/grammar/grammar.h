#pragma once
// A context-free grammar over bytes, the form constrained sampling checks text against (as
// llama.cpp's GBNF does): rules of alternatives, each a sequence of byte sets and references to
// rules. Built by GrammarBuilder (the JSON-schema compiler uses it; gbnf.h reads the text form)
// and then frozen into tables a GrammarMatcher walks: per position in an alternative, the bytes
// that can come next (FIRST), whether the rest may be empty, and the fewest bytes that finish it
// (what a matcher needs to close the document in time when the token budget runs out).
//
// Refused at build: a rule without alternatives, a reference to a rule never given any, left
// recursion (A ::= A x, directly or through rules that may be empty: a matcher would expand it
// forever) and rules that can never finish (A ::= "a" A and nothing else).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace orchard {

// A set of byte values.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(unsigned char c) const { return (bits[c >> 6] >> (c & 63)) & 1; }
  void add(unsigned char c) { bits[c >> 6] |= uint64_t{1} << (c & 63); }
  void add(unsigned char lo, unsigned char hi) {
    for (unsigned c = lo; c <= hi; ++c) add(static_cast<unsigned char>(c));
  }
  void add(const ByteSet& o) {
    for (size_t i = 0; i < 4; ++i) bits[i] |= o.bits[i];
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
  static ByteSet of(unsigned char c) {
    ByteSet s;
    s.add(c);
    return s;
  }
  static ByteSet range(unsigned char lo, unsigned char hi) {
    ByteSet s;
    s.add(lo, hi);
    return s;
  }
};

// One symbol of an alternative: a byte from a set, or a whole rule.
struct GrammarSymbol {
  bool is_rule = false;
  uint32_t rule = 0;
  ByteSet set;
  static GrammarSymbol bytes(const ByteSet& s) { return {false, 0, s}; }
  static GrammarSymbol byte(unsigned char c) { return bytes(ByteSet::of(c)); }
  static GrammarSymbol ref(uint32_t r) { return {true, r, {}}; }
};
using GrammarSequence = std::vector<GrammarSymbol>;

// The frozen tables. Positions ("elements") number every symbol of every alternative, each
// alternative ending in an End element; element 0 is the start: a reference to the root.
struct Grammar {
  enum class Kind : uint8_t { Bytes, Rule, End };
  struct Element {
    Kind kind;
    uint32_t arg;  // Bytes: index into sets; Rule: the rule
  };
  static constexpr uint32_t kNoEnd = UINT32_MAX;  // min_len of what can never finish

  std::vector<Element> elements;
  std::vector<ByteSet> sets;
  std::vector<std::string> rule_names;
  std::vector<uint32_t> alt_begin;  // rule r's alternatives: alts[alt_begin[r] .. alt_begin[r + 1])
  std::vector<uint32_t> alts;       // an alternative's first element
  // Per element, about the rest of its alternative from there (not what follows the rule):
  std::vector<ByteSet> first;       // the bytes it can start with
  std::vector<uint8_t> nullable;    // it can be empty
  std::vector<uint32_t> min_len;    // the fewest bytes it can be
  std::vector<uint8_t> rule_nullable;
  uint32_t root = 0;

  size_t rule_count() const { return rule_names.size(); }
  // The text form (gbnf.h's syntax), for errors, logs and tests.
  std::string to_gbnf() const;
};

class GrammarBuilder {
 public:
  // A new rule; the name is made unique ("name", "name-2", …) and returned by name().
  uint32_t add_rule(std::string_view name);
  // A new rule with these alternatives.
  uint32_t add_rule(std::string_view name, std::vector<GrammarSequence> alternatives);
  void add_alternative(uint32_t rule, GrammarSequence seq);
  const std::string& name(uint32_t rule) const { return names_[rule]; }
  // The rule named exactly `name`, or UINT32_MAX.
  uint32_t find(std::string_view name) const;
  size_t rule_count() const { return names_.size(); }
  // Symbols in all alternatives so far (the compilers' size limit).
  size_t symbol_count() const { return symbols_; }

  // Freezes the grammar with `root` as its start; throws orchard::Error naming the rule at fault.
  Grammar build(uint32_t root) const;

  // The bytes of `text` as one symbol each.
  static GrammarSequence literal(std::string_view text);

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::unordered_map<std::string, uint32_t> next_suffix_;  // per base name, the next "-k" to try
  std::vector<std::vector<GrammarSequence>> rules_;
  size_t symbols_ = 0;
};

}  // namespace orchard
