// Tokenizer micro-benchmark (Google Benchmark): building a tokenizer from a vocabulary file, and
// encoding one pre-token of N identical letters, the input where a merge loop that rescans the
// word after every merge turns quadratic; the fitted complexity line says which it is (linear or
// N log N expected). The vocabularies come from the shared test data (tokenizer/).
// Usage: tokenizer_bench [DATA_DIR] [--benchmark_filter=encode] …
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/tokenizer/tokenizer.h"

namespace {

using namespace orchard;

std::filesystem::path g_data = ORCHARD_SHARED_DATA;

std::unique_ptr<GGUFFile> open_vocab(const std::string& vocab) {
  return GGUFFile::open((g_data / "tokenizer" / ("ggml-vocab-" + vocab + ".gguf")).string());
}

void load(benchmark::State& state, const std::string& vocab) {
  const auto file = open_vocab(vocab);
  for (auto _ : state) benchmark::DoNotOptimize(Tokenizer::from_gguf(*file));
}

void encode_one_long_word(benchmark::State& state, const std::string& vocab) {
  const auto file = open_vocab(vocab);
  const auto tokenizer = Tokenizer::from_gguf(*file);
  const std::string text(static_cast<size_t>(state.range(0)), 'a');
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer->encode(text, false));
  state.SetComplexityN(state.range(0));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] != '-') {
    g_data = argv[1];
    --argc;
    ++argv;
  }
  if (!std::filesystem::exists(g_data / "tokenizer")) {
    std::fprintf(stderr, "tokenizer_bench: no vocabularies under %s/tokenizer (give the data folder)\n",
                 g_data.string().c_str());
    return 1;
  }
  for (const char* vocab : {"llama-bpe", "qwen2", "llama-spm"})
    benchmark::RegisterBenchmark((std::string("load/") + vocab).c_str(), load, std::string(vocab))
        ->Unit(benchmark::kMillisecond);
  for (const char* vocab : {"llama-bpe", "llama-spm"})
    benchmark::RegisterBenchmark((std::string("encode_one_long_word/") + vocab).c_str(), encode_one_long_word,
                                 std::string(vocab))
        ->RangeMultiplier(4)
        ->Range(3125, 200000)
        ->Unit(benchmark::kMillisecond)
        ->Complexity();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
