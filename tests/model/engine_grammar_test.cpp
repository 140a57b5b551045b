// The engine's own loop (the CLI's, and a network node's) holds a reply to a grammar as the
// server's scheduler does: a random-weight model's replies parse and keep the schema, closed in
// time when the token budget is short, and stop as soon as the reply is whole.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/engine.h"
#include "model/grammar/json_schema.h"
#include "model/synthetic/synthetic.h"

namespace orchard {
namespace {

using json = nlohmann::json;

TEST(EngineGrammar, RepliesKeepTheSchemaWhateverTheModelSays) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "engine-grammar-tiny.gguf";
  if (!std::filesystem::exists(path)) write_synthetic_model(model_shape("tiny"), DType::Q8_0, 5, path.string());
  EngineOptions eo;
  eo.model_path = path.string();
  eo.threads = 2;
  eo.n_ctx = 256;
  auto engine = Engine::load(eo);
  const json schema = {{"type", "object"},
                       {"properties", {{"name", {{"type", "string"}, {"maxLength", 10}}},
                                       {"n", {{"type", "integer"}, {"minimum", 1}, {"maximum", 9}}},
                                       {"ok", {{"type", "boolean"}}}}},
                       {"required", {"name", "n", "ok"}},
                       {"additionalProperties", false}};
  const auto grammar = std::make_shared<const Grammar>(json_schema_grammar(schema));
  for (int i = 0; i < 10; ++i) {
    GenerateOptions o;
    o.grammar = grammar;
    o.max_tokens = 30 + 10 * i;
    o.sampling.temperature = 1.0f;
    o.sampling.seed = 40 + static_cast<uint64_t>(i);
    const GenerateResult r = engine->generate("a reply", o);
    const json v = json::parse(r.text, nullptr, false);
    ASSERT_TRUE(!v.is_discarded() && v.is_object()) << r.text;
    EXPECT_EQ(v.size(), 3u) << r.text;
    EXPECT_TRUE(v["name"].is_string() && v["name"].get<std::string>().size() <= 40) << r.text;
    EXPECT_TRUE(v["n"].is_number_integer() && v["n"].get<int>() >= 1 && v["n"].get<int>() <= 9) << r.text;
    EXPECT_TRUE(v["ok"].is_boolean()) << r.text;
    EXPECT_EQ(r.finish_reason, "stop") << r.text;
    EXPECT_LE(static_cast<int>(r.tokens.size()), o.max_tokens);
  }
}

}  // namespace
}  // namespace orchard
