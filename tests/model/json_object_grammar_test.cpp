// JSON mode's grammar (any one object) against nlohmann::json's parser as the reference: every
// prefix of a valid object is viable and only the whole one complete; random corruptions are
// accepted exactly when the parser accepts them (apart from the grammar's bounds on blanks and
// digits); the closing length is the length of a real shortest completion.
#include "model/grammar/grammar_matcher.h"
#include "model/grammar/json_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace orchard {
namespace {

using nlohmann::json;

json random_value(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 3 ? 5 : 7);
  switch (kind(rng)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng() % 2000) - 1000;
    case 3: return std::uniform_real_distribution<double>(-1e6, 1e6)(rng) * std::pow(10.0, static_cast<int>(rng() % 40) - 20);
    case 4: {
      static const char* strings[] = {"", "plain", "tab\there", "quote \" and \\ slash /", "caf\xc3\xa9", "\xe2\x82\xac 5",
                                      "\xf0\x9f\x98\x80", "new\nline", "\x01 control"};
      return strings[rng() % 9];
    }
    case 5: return static_cast<uint64_t>(rng());
    case 6: {
      json a = json::array();
      for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i) o["k" + std::to_string(rng() % 50)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

std::string random_object(std::mt19937& rng) {
  json o = json::object();
  for (int i = 0, n = static_cast<int>(rng() % 5); i < n; ++i) o["key" + std::to_string(i)] = random_value(rng, 1);
  const int style = static_cast<int>(rng() % 3);
  std::string s = style == 0 ? o.dump() : style == 1 ? o.dump(2) : o.dump(-1, ' ', true);  // ASCII: \u escapes
  if (s.find("\\ud") != std::string::npos) s = o.dump();  // surrogate pairs: refused by design
  if (rng() % 4 == 0) s = " \n" + s;
  return s;
}

GrammarMatcher object_matcher() { return GrammarMatcher(json_object_grammar()); }

// Outside the grammar's bounds though valid JSON: more than 20 blanks in a row, more than 20
// digits in a number's part or 2 in its exponent, or a \u surrogate (refused by design: a model
// never needs one).
bool beyond_bounds(const std::string& s) {
  size_t blanks = 0, digits = 0;
  bool exponent = false;
  for (char c : s) {
    blanks = (c == ' ' || c == '\t' || c == '\n' || c == '\r') ? blanks + 1 : 0;
    const bool digit = c >= '0' && c <= '9';
    if (c == 'e' || c == 'E') exponent = true;
    else if (!digit && c != '+' && c != '-') exponent = false;
    digits = digit ? digits + 1 : 0;
    if (blanks > 20 || digits > 20 || (exponent && digits > 2)) return true;
  }
  return s.find("\\uD") != std::string::npos || s.find("\\ud") != std::string::npos;
}

TEST(JsonObjectGrammar, EveryPrefixOfAnObjectIsViableAndOnlyTheWholeIsComplete) {
  std::mt19937 rng(7);
  for (int n = 0; n < 500; ++n) {
    const std::string doc = random_object(rng);
    GrammarMatcher p = object_matcher();
    size_t end = doc.find_last_not_of(" \t\n\r") + 1;
    for (size_t i = 0; i < doc.size(); ++i) {
      ASSERT_TRUE(p.feed(static_cast<unsigned char>(doc[i]))) << "byte " << i << " of " << doc;
      EXPECT_EQ(p.complete(), i + 1 >= end) << "after byte " << i << " of " << doc;
    }
  }
}

TEST(JsonObjectGrammar, AcceptsACorruptedTextExactlyWhenTheParserDoes) {
  std::mt19937 rng(11);
  const std::string alphabet = "{}[]:,\"\\ 0123456789.eE+-tfnulrsa\x01\x7f\xc3\xa9\xed\xa0\xf4\x90";
  int agreed_valid = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string s = random_object(rng);
    for (int k = 0, edits = 1 + static_cast<int>(rng() % 3); k < edits && !s.empty(); ++k) {
      const size_t at = rng() % s.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: s[at] = c; break;
        case 1: s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        default: s.erase(at, 1); break;
      }
    }
    bool reference = false;
    try {
      reference = json::parse(s).is_object();
    } catch (const json::out_of_range&) {
      continue;  // a number too large for a double: valid JSON text, refused by this parser
    } catch (const json::parse_error&) {
    }
    if (reference && beyond_bounds(s)) continue;
    // The grammar allows no blanks after the object: generation stops there.
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) s.pop_back();
    GrammarMatcher p = object_matcher();
    const bool ours = p.feed(s) && p.complete();
    ASSERT_EQ(ours, reference) << s;
    agreed_valid += ours;
  }
  EXPECT_GT(agreed_valid, 1000);  // the corruptions left plenty of valid ones to compare too
}

TEST(JsonObjectGrammar, TheClosingLengthIsAShortestCompletion) {
  std::mt19937 rng(13);
  for (int n = 0; n < 300; ++n) {
    const std::string doc = random_object(rng);
    for (size_t cut = 0; cut <= doc.size(); ++cut) {
      GrammarMatcher p = object_matcher();
      ASSERT_TRUE(p.feed(std::string_view(doc).substr(0, cut)));
      EXPECT_EQ(p.complete(), p.closing_length() == 0);
      // Greedily take any byte that shortens the closing by one: the end must come after
      // exactly closing_length() bytes, and parse.
      std::string closed = doc.substr(0, cut);
      const uint32_t need = p.closing_length();
      for (uint32_t k = 0; k < need; ++k) {
        GrammarMatcher next;
        bool moved = false;
        for (int c = 0; c < 256 && !moved; ++c)
          if (p.feed_into(static_cast<unsigned char>(c), next) && next.closing_length() + 1 == p.closing_length()) {
            p = next;
            closed += static_cast<char>(c);
            moved = true;
          }
        ASSERT_TRUE(moved) << closed;
      }
      EXPECT_TRUE(p.complete()) << closed;
      const json parsed = json::parse(closed, nullptr, false);
      EXPECT_TRUE(!parsed.is_discarded() && parsed.is_object()) << closed;
    }
  }
}

// Nesting is bounded (GrammarMatcher::kMaxDepth positions a stack): a model cannot grow the
// parse, and every automaton state holding it, without limit.
TEST(JsonObjectGrammar, NestingDeeperThanTheBoundIsRefused) {
  GrammarMatcher shallow = object_matcher();
  EXPECT_TRUE(shallow.feed("{\"a\": " + std::string(50, '[') + std::string(50, ']') + "}"));
  EXPECT_TRUE(shallow.complete());
  GrammarMatcher deep = object_matcher();
  size_t fed = 0;
  const std::string text = "{\"a\": " + std::string(5000, '[');
  while (fed < text.size() && deep.feed(static_cast<unsigned char>(text[fed]))) ++fed;
  EXPECT_LT(fed, text.size());
  EXPECT_GT(fed, 200u);  // a few frames a level: some hundreds of levels
}

}  // namespace
}  // namespace orchard
