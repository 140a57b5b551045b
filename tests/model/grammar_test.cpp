// The grammar, its matcher, the JSON-schema compiler and the token trie. Sentences are drawn
// by random walks through the matcher (each byte chosen among those it admits) and checked with
// nlohmann's parser and the schema's own constraints; refusals against hand-picked texts.
#include <gtest/gtest.h>

#include <chrono>

#include <nlohmann/json.hpp>
#include <random>

#include "model/grammar/grammar.h"
#include "model/grammar/grammar_dfa.h"
#include "model/grammar/grammar_matcher.h"
#include "model/grammar/json_schema.h"
#include "model/grammar/token_trie.h"

namespace orchard {
namespace {

using json = nlohmann::json;

std::shared_ptr<const Grammar> schema(const json& s) { return std::make_shared<const Grammar>(json_schema_grammar(s)); }

bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.feed(text) && m.complete();
}

// A random sentence: each byte uniform among those admitted; once `budget` bytes are out,
// only bytes that bring the end closer; stops when complete and a coin says so (or nothing
// may follow).
std::string random_sentence(const std::shared_ptr<const Grammar>& g, std::mt19937& rng, size_t budget = 200) {
  GrammarMatcher m(g);
  std::string out;
  for (;;) {
    if (m.complete() && (!m.can_continue() || rng() % 4 == 0 || out.size() > budget)) return out;
    std::vector<unsigned char> ok;
    GrammarMatcher next;
    const uint32_t need = m.closing_length();
    for (int c = 0; c < 256; ++c)
      if (m.feed_into(static_cast<unsigned char>(c), next) && (out.size() <= budget || next.closing_length() < need))
        ok.push_back(static_cast<unsigned char>(c));
    if (ok.empty()) {
      ADD_FAILURE() << "stuck after " << out;
      return out;
    }
    const unsigned char c = ok[rng() % ok.size()];
    EXPECT_TRUE(m.feed(c));
    out += static_cast<char>(c);
  }
}

TEST(Grammar, RefusesLeftRecursionUndefinedRulesAndEndlessRules) {
  {
    GrammarBuilder b;
    const uint32_t a = b.add_rule("a");
    b.add_alternative(a, {GrammarSymbol::ref(a), GrammarSymbol::byte('x')});
    b.add_alternative(a, {GrammarSymbol::byte('y')});
    EXPECT_THROW(
        try { b.build(a); } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("left-recursive"), std::string::npos) << e.what();
          throw;
        },
        Error);
  }
  {
    GrammarBuilder b;
    const uint32_t a = b.add_rule("a"), undefined = b.add_rule("later");
    b.add_alternative(a, {GrammarSymbol::ref(undefined)});
    EXPECT_THROW(b.build(a), Error);
  }
  {
    GrammarBuilder b;
    const uint32_t a = b.add_rule("a");
    b.add_alternative(a, {GrammarSymbol::byte('a'), GrammarSymbol::ref(a)});
    EXPECT_THROW(b.build(a), Error);
  }
}

TEST(Grammar, MatcherHoldsAmbiguityAndReportsTheShortestClosing) {
  // root ::= "ab" c | "a" c "d";  c ::= "" | "c"
  GrammarBuilder b;
  const uint32_t c = b.add_rule("c", {{}, {GrammarSymbol::byte('c')}});
  GrammarSequence s1 = GrammarBuilder::literal("ab");
  s1.push_back(GrammarSymbol::ref(c));
  GrammarSequence s2 = GrammarBuilder::literal("a");
  s2.push_back(GrammarSymbol::ref(c));
  s2.push_back(GrammarSymbol::byte('d'));
  const uint32_t root = b.add_rule("root", {s1, s2});
  auto g = std::make_shared<const Grammar>(b.build(root));
  GrammarMatcher m(g);
  EXPECT_EQ(m.closing_length(), 2u);
  ASSERT_TRUE(m.feed('a'));
  EXPECT_EQ(m.closing_length(), 1u);  // "ab" or "ad"
  EXPECT_FALSE(m.complete());
  GrammarMatcher ab = m, ac = m;
  ASSERT_TRUE(ab.feed('b'));
  EXPECT_TRUE(ab.complete());
  EXPECT_TRUE(ab.can_continue());  // "abc"
  ASSERT_TRUE(ac.feed('c'));
  EXPECT_FALSE(ac.complete());
  EXPECT_EQ(ac.closing_length(), 1u);
  EXPECT_TRUE(ac.feed('d'));
  EXPECT_TRUE(ac.complete());
  EXPECT_FALSE(ac.can_continue());
  EXPECT_FALSE(ac.feed('d'));
  EXPECT_TRUE(ac.refused());
  EXPECT_NE(g->to_gbnf().find("root ::= \"ab\" c | \"a\" c \"d\""), std::string::npos) << g->to_gbnf();
}

TEST(JsonSchemaGrammar, AnyObjectAgreesWithAJsonParser) {
  auto g = schema({{"type", "object"}});
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_sentence(g, rng);
    json parsed;
    ASSERT_NO_THROW(parsed = json::parse(text)) << text;
    EXPECT_TRUE(parsed.is_object()) << text;
  }
  for (const char* good : {"{}", "{\"a\": [1, 2.5e3, -0.25, true, null, \"x\\n\\u00e9\"]}", " {\"k\":{\"n\":{}}}",
                           "{\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\": \"\"}"})
    EXPECT_TRUE(accepts(g, good)) << good;
  for (const char* bad : {"[]", "{,}", "{\"a\" 1}", "{\"a\":01}", "{\"a\":\"\x01\"}", "{\"a\":\"\xC0\xAF\"}",
                          "{\"a\":\"\\ud800\"}", "{\"a\":tru}", "{\"a\":1,}", "{}}"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(JsonSchemaGrammar, ObjectsKeepRequiredPropertiesTypesAndNoOthers) {
  const json s = {
      {"type", "object"},
      {"properties",
       {{"name", {{"type", "string"}, {"minLength", 2}, {"maxLength", 5}}},
        {"age", {{"type", "integer"}, {"minimum", 18}, {"maximum", 120}}},
        {"tags", {{"type", "array"}, {"items", {{"enum", {"a", "b", 3}}}}, {"minItems", 1}, {"maxItems", 3}}},
        {"score", {{"type", "number"}, {"exclusiveMinimum", -1.5}, {"maximum", 2}}},
        {"ok", {{"type", {"boolean", "null"}}}}}},
      {"required", {"name", "age"}},
      {"additionalProperties", false},
  };
  auto g = schema(s);
  std::mt19937 rng(11);
  int with_tags = 0, with_score = 0;
  for (int i = 0; i < 400; ++i) {
    const std::string text = random_sentence(g, rng, 120);
    json v;
    ASSERT_NO_THROW(v = json::parse(text)) << text;
    ASSERT_TRUE(v.is_object()) << text;
    for (const auto& [key, _] : v.items()) EXPECT_TRUE(s["properties"].contains(key)) << text;
    ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << text;
    const auto name = v["name"].get<std::string>();
    EXPECT_TRUE(name.size() >= 2) << text;  // characters, not bytes: at least as many bytes
    ASSERT_TRUE(v.contains("age") && v["age"].is_number_integer()) << text;
    EXPECT_GE(v["age"].get<int64_t>(), 18) << text;
    EXPECT_LE(v["age"].get<int64_t>(), 120) << text;
    if (v.contains("tags")) {
      ++with_tags;
      EXPECT_TRUE(v["tags"].size() >= 1 && v["tags"].size() <= 3) << text;
      for (const json& t : v["tags"]) EXPECT_TRUE(t == "a" || t == "b" || t == 3) << text;
    }
    if (v.contains("score")) {
      ++with_score;
      EXPECT_GT(v["score"].get<double>(), -1.5) << text;
      EXPECT_LE(v["score"].get<double>(), 2.0) << text;
    }
    if (v.contains("ok")) {
      EXPECT_TRUE(v["ok"].is_boolean() || v["ok"].is_null()) << text;
    }
  }
  EXPECT_GT(with_tags, 20);
  EXPECT_GT(with_score, 20);
  EXPECT_TRUE(accepts(g, R"({"age": 18, "name": "Ann", "ok": null, "score": 1.25, "tags": [3, "a"]})"));
  EXPECT_FALSE(accepts(g, R"({"age": 17, "name": "Ann"})"));
  EXPECT_FALSE(accepts(g, R"({"age": 121, "name": "Ann"})"));
  EXPECT_FALSE(accepts(g, R"({"age": 20, "name": "A"})"));
  EXPECT_FALSE(accepts(g, R"({"age": 20, "name": "Annabel"})"));
  EXPECT_FALSE(accepts(g, R"({"age": 20})"));
  EXPECT_TRUE(accepts(g, R"({"age": 20, "name": "Ann"})"));
  EXPECT_FALSE(accepts(g, R"({"age": 20, "extra": 1, "name": "Ann"})"));
  EXPECT_FALSE(accepts(g, R"({"age": 20, "name": "Ann", "tags": []})"));
  EXPECT_FALSE(accepts(g, R"({"age": 20, "name": "Ann", "score": -1.5})"));
  EXPECT_FALSE(accepts(g, R"({"age": 20, "name": "Ann", "score": 2.5})"));
}

TEST(JsonSchemaGrammar, IntegerRangesAreExact) {
  std::mt19937 rng(3);
  for (auto [lo, hi] : std::vector<std::pair<int64_t, int64_t>>{{0, 9}, {7, 1234}, {-250, -17}, {-3, 3}, {99, 100}, {-1000, 5}}) {
    auto g = schema({{"type", "integer"}, {"minimum", lo}, {"maximum", hi}});
    for (int64_t v = lo - 30; v <= hi + 30; ++v)
      EXPECT_EQ(accepts(g, std::to_string(v)), v >= lo && v <= hi) << v << " in [" << lo << ", " << hi << "]";
    EXPECT_FALSE(accepts(g, "-0"));
    EXPECT_FALSE(accepts(g, "007"));
  }
  auto open = schema({{"type", "integer"}, {"exclusiveMinimum", 10}});
  EXPECT_FALSE(accepts(open, "10"));
  EXPECT_TRUE(accepts(open, "11"));
  EXPECT_TRUE(accepts(open, "123456789012"));
  EXPECT_FALSE(accepts(open, "-11"));
}

TEST(JsonSchemaGrammar, RefsAnyOfAllOfAndTuples) {
  const json s = {
      {"$defs", {{"node", {{"type", "object"}, {"properties", {{"v", {{"type", "integer"}}}, {"next", {{"anyOf", {{{"$ref", "#/$defs/node"}}, {{"type", "null"}}}}}}}}, {"required", {"v", "next"}}}}}},
      {"type", "object"},
      {"properties", {{"list", {{"$ref", "#/$defs/node"}}},
                      {"pair", {{"type", "array"}, {"prefixItems", {{{"type", "string"}}, {{"const", 42}}}}, {"items", false}, {"minItems", 2}}},
                      {"both", {{"allOf", {{{"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}},
                                            {{"properties", {{"b", {{"type", "string"}}}}}, {"required", {"b"}}}}}}}}},
      {"required", {"list", "pair", "both"}},
  };
  auto g = schema(s);
  // Properties come in the order of their names (the schema is read into a sorted map).
  EXPECT_TRUE(accepts(g, R"({"both": {"a": 1, "b": "c"}, "list": {"next": {"next": null, "v": 2}, "v": 1}, "pair": ["x", 42]})"));
  EXPECT_FALSE(accepts(g, R"({"both": {"a": 1, "b": "c"}, "list": {"next": {"v": 2}, "v": 1}, "pair": ["x", 42]})"));
  EXPECT_FALSE(accepts(g, R"({"both": {"a": 1, "b": "c"}, "list": {"next": null, "v": 1}, "pair": ["x", 41]})"));
  EXPECT_FALSE(accepts(g, R"({"both": {"a": 1, "b": "c"}, "list": {"next": null, "v": 1}, "pair": ["x", 42, 1]})"));
  EXPECT_FALSE(accepts(g, R"({"both": {"a": 1}, "list": {"next": null, "v": 1}, "pair": ["x", 42]})"));
  std::mt19937 rng(5);
  for (int i = 0; i < 100; ++i) {
    const std::string text = random_sentence(g, rng, 150);
    json v;
    ASSERT_NO_THROW(v = json::parse(text)) << text;
    EXPECT_EQ(v["pair"][1], 42) << text;
    EXPECT_TRUE(v["both"]["a"].is_number_integer() && v["both"]["b"].is_string()) << text;
  }
}

TEST(JsonSchemaGrammar, RefusesWhatItCannotKeepNamingWhere) {
  auto where = [](const json& s) {
    try {
      json_schema_grammar(s);
    } catch (const SchemaError& e) {
      return e.where() + " | " + e.what();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(where({{"type", "object"}, {"properties", {{"id", {{"type", "string"}, {"pattern", "^a"}}}}}}).substr(0, 16),
            "/properties/id |");
  EXPECT_NE(where({{"type", "string"}, {"pattern", "^a"}}).find("'pattern' is not supported"), std::string::npos);
  EXPECT_NE(where({{"type", "wat"}}).find("unknown type 'wat'"), std::string::npos);
  EXPECT_NE(where({{"$ref", "#/$defs/missing"}}).find("names nothing"), std::string::npos);
  EXPECT_NE(where({{"type", "string"}, {"minLength", 5}, {"maxLength", 2}}).find("minLength is above maxLength"), std::string::npos);
  EXPECT_NE(where({{"type", "integer"}, {"minimum", 5}, {"maximum", 2}}).find("no integer"), std::string::npos);
  EXPECT_NE(where({{"type", "string"}, {"maxLength", 1000000}}).find("too large"), std::string::npos);
  EXPECT_NE(where(json::array()).find("must be an object or a boolean"), std::string::npos);
  EXPECT_NE(where(false).find("accepts nothing"), std::string::npos);
  json deep = {{"type", "string"}};
  for (int i = 0; i < 100; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_NE(where(deep).find("nested more than"), std::string::npos);
  json optional = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 101; ++i) optional["properties"]["p" + std::to_string(i)] = {{"type", "integer"}};
  EXPECT_NE(where(optional).find("101 optional properties"), std::string::npos);
  EXPECT_NE(where({{"allOf", {{{"required", {"a"}}}}}, {"anyOf", {{{"type", "string"}}}}}).find("allOf beside anyOf"),
            std::string::npos);
  EXPECT_NE(where({{"type", "integer"}, {"minimum", 1e16}}).find("beyond"), std::string::npos);
  EXPECT_NE(where({{"type", "number"}, {"maximum", -1e17}, {"minimum", -1e18}}).find("beyond"), std::string::npos);
  EXPECT_NE(where({{"type", "array"}, {"prefixItems", {{{"type", "string"}}}}, {"items", false}, {"minItems", 3}})
                .find("more items than items: false"),
            std::string::npos);
  EXPECT_NE(where({{"type", "string"}, {"nullable", "yes"}}).find("/nullable: must be a boolean"), std::string::npos);
  EXPECT_NE(where({{"type", {"array", "array", "array", "array", "array", "array", "array", "array", "array", "array"}},
                   {"maxItems", 10000}})
                .find("too large"),
            std::string::npos);
  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 30000; ++i) {
    wide["properties"]["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 40}};
    wide["required"].push_back("p" + std::to_string(i));
  }
  EXPECT_NE(where(wide).find("too large"), std::string::npos);
}

// anyOf of the same $ref twice, nested: followed naively every byte would take 2^22 steps. The
// compiler merges the duplicates, and the matcher's work per byte is bounded anyway.
TEST(JsonSchemaGrammar, DuplicatedAlternativesDoNotMultiplyTheWork) {
  json defs = json::object();
  for (int k = 0; k < 22; ++k)
    defs["L" + std::to_string(k)] = {{"anyOf", {{{"$ref", "#/$defs/L" + std::to_string(k + 1)}}, {{"$ref", "#/$defs/L" + std::to_string(k + 1)}}}}};
  defs["L22"] = {{"type", "integer"}};
  auto g = schema({{"$defs", defs}, {"$ref", "#/$defs/L0"}});
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(accepts(g, "12345"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);  // a hang, not a speed
  // Distinct branches that share their start: the work bound refuses rather than stalls.
  json wide = json::object();
  for (int k = 0; k < 16; ++k)
    wide["W" + std::to_string(k)] = {{"anyOf", {{{"$ref", "#/$defs/W" + std::to_string(k + 1)}}, {{"allOf", {{{"$ref", "#/$defs/W" + std::to_string(k + 1)}}}}}}}};
  wide["W16"] = {{"type", "object"}};
  try {
    auto g2 = schema({{"$defs", wide}, {"$ref", "#/$defs/W0"}});
    GrammarMatcher m(g2);
    m.feed("{}");
  } catch (const SchemaError&) {
    // refused at compile time is fine too
  }
}

TEST(TokenTrie, AdmitsExactlyTheTokensAWholeFeedAdmits) {
  std::vector<std::string> pieces = {"", "{", "{\"", "\"", "a", "ab", "abc", "\":", " ", "1", "12", "}", "},", "\n",
                                     "true", "tr", "\"}", "é", "\xC3", "\xA9", ",\"", "null"};
  std::mt19937 rng(9);
  for (int i = 0; i < 300; ++i) {
    std::string p;
    const char* alphabet = "{}[]\":, abc01e.-\\u";
    for (size_t n = 1 + rng() % 4; n > 0; --n) p += alphabet[rng() % 18];
    pieces.push_back(p);
  }
  const TokenTrie trie(pieces);
  auto g = schema({{"type", "object"}, {"properties", {{"a", {{"type", "array"}, {"items", {{"type", "integer"}}}}}, {"b", {{"type", "string"}}}}}});
  GrammarDfa dfa(g);
  for (const char* prefix : {"", "{", "{\"a\": [1", "{\"b\": \"x", "{\"a\": []", "{\"a\": [], \"b\": \"\\"}) {
    GrammarMatcher at(g);
    ASSERT_TRUE(at.feed(prefix)) << prefix;
    std::vector<int32_t> by_trie, by_feed;
    // Twice: the second walk reads the automaton's tables the first one filled.
    for (int pass = 0; pass < 2; ++pass) {
      by_trie.clear();
      trie.for_each_admitted(dfa, dfa.intern(at), [&](int32_t id, uint32_t after) {
        by_trie.push_back(id);
        GrammarMatcher check = at;
        EXPECT_TRUE(check.feed(pieces[id]));
        EXPECT_EQ(check.stacks(), dfa.matcher(after).stacks()) << pieces[id];
        EXPECT_EQ(check.closing_length(), dfa.closing_length(after)) << pieces[id];
        EXPECT_EQ(check.complete(), dfa.complete(after)) << pieces[id];
      });
    }
    for (size_t id = 0; id < pieces.size(); ++id) {
      GrammarMatcher check = at;
      if (!pieces[id].empty() && check.feed(pieces[id])) by_feed.push_back(static_cast<int32_t>(id));
    }
    std::sort(by_trie.begin(), by_trie.end());
    EXPECT_EQ(by_trie, by_feed) << prefix;
    EXPECT_FALSE(by_feed.empty()) << prefix;
  }
  const size_t states = dfa.size();
  EXPECT_GT(states, 1u);
  dfa.clear();
  EXPECT_EQ(dfa.size(), 0u);
  EXPECT_EQ(dfa.epoch(), 1u);
}

}  // namespace
}  // namespace orchard
