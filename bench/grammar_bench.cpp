// Constrained sampling's cost per token (Google Benchmark): the mask a grammar puts on a real
// vocabulary (Llama 2's 32,000 SentencePiece pieces, the `1b` shape's size, and Llama 3's 128,256
// BPE pieces) while a reply is drawn through it, token by token, each token picked at random among
// those the grammar admits. Compare ms_per_token with the model's own time per token (`orchard
// bench`): issue 27 asks for ≤ 10 % of tg on the 1b shape. The vocabularies come from the shared
// test data (tokenizer/).
// Usage: grammar_bench [DATA_DIR] [--benchmark_filter=spm] …
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/grammar/json_schema.h"
#include "model/grammar/grammar_vocab.h"
#include "model/tokenizer/tokenizer.h"

namespace {

using namespace orchard;
using json = nlohmann::json;

std::filesystem::path g_data = ORCHARD_SHARED_DATA;

struct Vocab {
  std::vector<std::string> pieces;
  std::shared_ptr<const TokenTrie> trie;
};

const Vocab& vocab(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Vocab>> cache;
  auto& v = cache[name];
  if (!v) {
    const auto file = GGUFFile::open((g_data / "tokenizer" / ("ggml-vocab-" + name + ".gguf")).string());
    const auto tok = Tokenizer::from_gguf(*file);
    v = std::make_unique<Vocab>();
    for (TokenId id = 0; id < tok->vocab_size(); ++id)
      v->pieces.push_back(tok->is_eog(id) ? std::string() : tok->token_to_piece(id));
    v->trie = std::make_shared<const TokenTrie>(v->pieces);
  }
  return *v;
}

const json kWeather = {
    {"type", "object"},
    {"properties",
     {{"city", {{"type", "string"}, {"maxLength", 40}}},
      {"temp", {{"type", "integer"}, {"minimum", -40}, {"maximum", 50}}},
      {"sky", {{"enum", {"clear", "cloudy", "rain"}}}},
      {"note", {{"type", "string"}}},
      {"hours", {{"type", "array"}, {"items", {{"type", "number"}}}, {"maxItems", 6}}}}},
    {"required", {"city", "temp", "sky", "note", "hours"}},
};

void mask_per_token(benchmark::State& state, const std::string& vocab_name, const json& schema) {
  const Vocab& v = vocab(vocab_name);
  const auto grammar = schema.is_null() ? json_object_grammar() : std::make_shared<const Grammar>(json_schema_grammar(schema));
  std::mt19937 rng(1);
  std::vector<float> mask(v.pieces.size());
  double seconds = 0;
  int64_t tokens = 0;
  // One automaton and token lists for all the replies, as the server keeps per grammar.
  GrammarVocab gv(grammar, v.trie);
  GrammarDfa& dfa = gv.dfa();
  for (auto _ : state) {
    uint32_t s = dfa.start();
    for (int step = 0; step < 96 && !(dfa.complete(s) && !dfa.can_continue(s)); ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      std::fill(mask.begin(), mask.end(), -1e30f);
      std::vector<int32_t> admitted;
      for (const GrammarVocab::Admitted& a : gv.admitted(s)) {
        if (!dfa.complete(a.after) && dfa.closing_length(a.after) + 1 >= static_cast<uint32_t>(96 - step)) continue;
        mask[static_cast<size_t>(a.token)] = 0;
        admitted.push_back(a.token);
      }
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++tokens;
      if (admitted.empty()) break;
      for (char c : v.pieces[static_cast<size_t>(admitted[rng() % admitted.size()])]) s = dfa.next(s, static_cast<unsigned char>(c));
    }
  }
  state.counters["states"] = static_cast<double>(dfa.size());
  state.counters["ms_per_token"] = tokens ? 1e3 * seconds / static_cast<double>(tokens) : 0;
  state.counters["tokens"] = static_cast<double>(tokens);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] != '-') {
    g_data = argv[1];
    --argc, ++argv;
  }
  if (!std::filesystem::exists(g_data / "tokenizer")) {
    std::fprintf(stderr, "grammar_bench: %s has no tokenizer/ folder (pass the shared data folder)\n", g_data.c_str());
    return 1;
  }
  for (const std::string v : {"llama-spm", "llama-bpe"}) {
    benchmark::RegisterBenchmark(("mask/json_object/" + v).c_str(), mask_per_token, v, json());
    benchmark::RegisterBenchmark(("mask/schema/" + v).c_str(), mask_per_token, v, kWeather);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
