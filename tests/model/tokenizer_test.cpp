// Tokenizers against llama.cpp's reference vectors (made by the Hugging Face tokenizers), the
// stories260K golden ids, special-token handling, streaming UTF-8 and malformed metadata.
#include "model/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "tensor/error.h"
#include "test_data.h"

namespace orchard {
namespace {

struct LoadedTokenizer {
  std::unique_ptr<GGUFFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
};

LoadedTokenizer load_tokenizer(const std::string& rel) {
  LoadedTokenizer t;
  t.file = GGUFFile::open(test::data_file(rel).string());
  t.tokenizer = Tokenizer::from_gguf(*t.file);
  return t;
}

std::string read_text(const std::filesystem::path& p) {
  auto bytes = test::read_bytes(p);
  return std::string(bytes.begin(), bytes.end());
}

struct VectorCase {
  std::string text;
  std::vector<TokenId> ids;
};

// The .inp/.out format of llama.cpp's test-tokenizer-0 (see the data folder's README.md).
std::vector<VectorCase> read_vectors(const std::string& vocab) {
  const std::string inp = read_text(test::data_file("tokenizer/ggml-vocab-" + vocab + ".gguf.inp"));
  const std::string out = read_text(test::data_file("tokenizer/ggml-vocab-" + vocab + ".gguf.out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VectorCase> cases;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(sep, pos);
    if (end == std::string::npos) break;
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (auto& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    for (TokenId id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

std::string show(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) s += " " + std::to_string(id);
  return s;
}

class TokenizerVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerVectors, EncodesEveryVectorExactlyAndRoundTrips) {
  ORCHARD_REQUIRE_DATA();
  const std::string vocab = GetParam();
  const auto t = load_tokenizer("tokenizer/ggml-vocab-" + vocab + ".gguf");
  const auto cases = read_vectors(vocab);
  ASSERT_EQ(cases.size(), 46u);
  int encoded = 0, round_tripped = 0;
  for (const auto& c : cases) {
    const auto ids = t.tokenizer->encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    if (ids == c.ids)
      ++encoded;
    else
      ADD_FAILURE() << vocab << ": '" << c.text << "'\n  want" << show(c.ids) << "\n  got " << show(ids);
    const std::string back = t.tokenizer->decode(ids);
    if (back == c.text)
      ++round_tripped;
    else
      ADD_FAILURE() << vocab << ": decode(encode('" << c.text << "')) = '" << back << "'";
  }
  std::printf("[ %-14s ] %d/46 vectors, %d/46 round trips\n", vocab.c_str(), encoded,
              round_tripped);
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, TokenizerVectors,
                         ::testing::Values("llama-spm", "phi-3", "deepseek-coder", "deepseek-llm",
                                           "falcon", "gpt-2", "mpt", "refact", "starcoder",
                                           "llama-bpe", "qwen2"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

TEST(TokenizerLoad, EncodeIsSafeFromManyThreads) {
  ORCHARD_REQUIRE_DATA();
  // As llama.cpp's test-tokenizer-0 does: one tokenizer, all vectors on several threads at once.
  const auto t = load_tokenizer("tokenizer/ggml-vocab-qwen2.gguf");
  const auto cases = read_vectors("qwen2");
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int round = 0; round < 5; ++round)
        for (const auto& c : cases)
          if (t.tokenizer->encode(c.text, false) != c.ids) ++mismatches[k];
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// How fast they load_tokenizer and encode (a quadratic merge would take minutes on the long text below)
// is measured by bench/tokenizer_bench, not asserted here: these machines are shared.
TEST(TokenizerLoad, LargeBpeVocabsLoadWithEveryToken) {
  ORCHARD_REQUIRE_DATA();
  for (const char* vocab : {"llama-bpe", "qwen2"}) {
    const auto t = load_tokenizer(std::string("tokenizer/ggml-vocab-") + vocab + ".gguf");
    const auto* tokens = t.file->get_string_array("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr) << vocab;
    EXPECT_GT(tokens->size(), 100000u) << vocab;
    EXPECT_EQ(t.tokenizer->vocab_size(), static_cast<int32_t>(tokens->size())) << vocab;
  }
}

TEST(TokenizerLoad, OneLongPreTokenRoundTrips) {
  ORCHARD_REQUIRE_DATA();
  // One pre-token of 200k identical letters, the input where a merge loop that rescans the
  // whole word after each merge turns quadratic.
  std::string text;
  text.assign(200000, 'a');
  for (const char* vocab : {"llama-bpe", "llama-spm"}) {
    const auto t = load_tokenizer(std::string("tokenizer/ggml-vocab-") + vocab + ".gguf");
    const auto ids = t.tokenizer->encode(text, false);
    EXPECT_LT(ids.size(), text.size() / 2) << vocab << ": the letters were not merged";
    EXPECT_EQ(t.tokenizer->decode(ids), text) << vocab;
  }
}

TEST(TokenizerLoad, VocabsWithoutVectorsLoadAndRoundTrip) {
  ORCHARD_REQUIRE_DATA();
  // baichuan: SPM without tokenizer.ggml.pre; gpt-neox: BPE without it (falls back to 'default').
  for (const char* vocab : {"baichuan", "gpt-neox"}) {
    const auto t = load_tokenizer(std::string("tokenizer/ggml-vocab-") + vocab + ".gguf");
    for (const std::string text : {"Hello, world! 3333 \xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE", "  two  spaces\n\tand tabs"}) {
      const auto ids = t.tokenizer->encode(text, false);
      EXPECT_FALSE(ids.empty()) << vocab;
      EXPECT_EQ(t.tokenizer->decode(ids), text) << vocab;
    }
  }
}

TEST(TokenizerLoad, InvalidUtf8InputIsEncodedWithoutLoss) {
  ORCHARD_REQUIRE_DATA();
  const std::string text = "ok \xFF\xFE broken \xE2\x82 end \x80";
  // Not falcon or deepseek-*: their byte-level alphabets lack 0xFE/0xFF (never in valid UTF-8).
  // Falcon then drops the bytes (no UNK); DeepSeek has "\xC3\xBF" etc. only as user-defined
  // tokens, which decode as that text.
  for (const char* vocab : {"llama-spm", "llama-bpe", "qwen2", "gpt-2"}) {
    const auto t = load_tokenizer(std::string("tokenizer/ggml-vocab-") + vocab + ".gguf");
    EXPECT_EQ(t.tokenizer->decode(t.tokenizer->encode(text, false)), text) << vocab;
  }
}

TEST(SpmTokenizer, Stories260KPromptWithBos) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const auto t = load_tokenizer("models/stories260K.gguf");
  EXPECT_EQ(t.tokenizer->encode("Once upon a time", true),
            (std::vector<TokenId>{1, 403, 407, 261, 378}));
  EXPECT_EQ(t.tokenizer->encode("The little dog", true),
            (std::vector<TokenId>{1, 291, 376, 400, 428}));
  EXPECT_EQ(t.tokenizer->bos(), 1);
  EXPECT_EQ(t.tokenizer->eos(), 2);
  EXPECT_TRUE(t.tokenizer->is_eog(2));
  EXPECT_FALSE(t.tokenizer->is_eog(1));
  EXPECT_EQ(t.tokenizer->vocab_size(), 512);
}

TEST(SpmTokenizer, Stories260KPerplexityText) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const auto t = load_tokenizer("models/stories260K.gguf");
  const std::string text = read_text(test::data_file("golden/stories260K.ppl_text.txt"));
  std::string golden = read_text(test::data_file("golden/stories260K.ppl_text.tokens.txt"));
  for (char& c : golden)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(golden);
  std::vector<TokenId> want;
  for (TokenId id; in >> id;) want.push_back(id);
  ASSERT_EQ(want.size(), 791u);
  const auto got = t.tokenizer->encode(text, true);
  EXPECT_EQ(got, want);
  // Drop BOS; the dummy-prefix space comes off again.
  EXPECT_EQ(t.tokenizer->decode(got), text);
}

TEST(SpmTokenizer, BosEosAndDummyPrefix) {
  ORCHARD_REQUIRE_DATA();
  const auto t = load_tokenizer("tokenizer/ggml-vocab-llama-spm.gguf");
  const auto plain = t.tokenizer->encode("Hello world", false);
  const auto with_bos = t.tokenizer->encode("Hello world", true);
  ASSERT_EQ(with_bos.size(), plain.size() + 1);
  EXPECT_EQ(with_bos.front(), 1);
  EXPECT_NE(with_bos.back(), 2);  // add_eos_token is false
  EXPECT_EQ(t.tokenizer->token_text(plain.front()), "\xE2\x96\x81Hello");
  EXPECT_EQ(t.tokenizer->token_to_piece(plain.front()), " Hello");
  EXPECT_EQ(t.tokenizer->decode(with_bos), "Hello world");
  EXPECT_EQ(t.tokenizer->decode(with_bos, /*special=*/true), "<s>Hello world");
  EXPECT_EQ(t.tokenizer->token_to_piece(1), "");
  EXPECT_EQ(t.tokenizer->token_to_piece(1, true), "<s>");
  EXPECT_EQ(t.tokenizer->token_type(1), TokenType::Control);
  EXPECT_EQ(t.tokenizer->encode("", true), std::vector<TokenId>{1});
  EXPECT_TRUE(t.tokenizer->encode("", false).empty());
  // Byte fallback: a character missing from the vocabulary is spelled in <0xXX> tokens.
  const auto bytes = t.tokenizer->encode("\xF0\x9F\xA6\x99", false);  // 🦙
  ASSERT_EQ(bytes.size(), 5u);  // '▁' then four byte tokens
  EXPECT_EQ(t.tokenizer->token_type(bytes[1]), TokenType::Byte);
  EXPECT_EQ(t.tokenizer->decode(bytes), "\xF0\x9F\xA6\x99");
}

TEST(SpmTokenizer, SpecialTokensParsedOnlyWhenAsked) {
  ORCHARD_REQUIRE_DATA();
  const auto t = load_tokenizer("tokenizer/ggml-vocab-phi-3.gguf");
  const std::string text = "<|user|>\nHi<|end|>";
  const auto parsed = t.tokenizer->encode(text, false, /*parse_special=*/true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(t.tokenizer->token_text(parsed.front()), "<|user|>");
  EXPECT_EQ(t.tokenizer->token_text(parsed.back()), "<|end|>");
  EXPECT_TRUE(t.tokenizer->is_eog(parsed.back()));
  EXPECT_TRUE(t.tokenizer->is_eog(t.tokenizer->eos()));
  // llama.cpp puts a dummy-prefix space before each text run after a special token; at the start
  // of the sequence decode() takes it off again.
  EXPECT_EQ(t.tokenizer->token_text(parsed[1]).substr(0, 3), "\xE2\x96\x81");
  EXPECT_EQ(t.tokenizer->decode(parsed, /*special=*/true), text);
  const auto literal = t.tokenizer->encode(text, false, /*parse_special=*/false);
  for (TokenId id : literal) EXPECT_NE(t.tokenizer->token_type(id), TokenType::Control);
  EXPECT_EQ(t.tokenizer->decode(literal), text);
}

TEST(BpeTokenizer, BosPolicyPerVocabulary) {
  ORCHARD_REQUIRE_DATA();
  const auto llama3 = load_tokenizer("tokenizer/ggml-vocab-llama-bpe.gguf");
  const auto ids = llama3.tokenizer->encode("Hello", true);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], 128000);  // llama-bpe adds BOS although the file has no add_bos_token key
  EXPECT_EQ(llama3.tokenizer->decode(ids), "Hello");
  EXPECT_EQ(llama3.tokenizer->decode(ids, true), "<|begin_of_text|>Hello");

  const auto qwen = load_tokenizer("tokenizer/ggml-vocab-qwen2.gguf");
  EXPECT_EQ(qwen.tokenizer->encode("Hello", true), qwen.tokenizer->encode("Hello", false));

  const auto deepseek = load_tokenizer("tokenizer/ggml-vocab-deepseek-llm.gguf");
  EXPECT_EQ(deepseek.tokenizer->encode("Hello", true).front(), 100000);
  const auto gpt2 = load_tokenizer("tokenizer/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(gpt2.tokenizer->encode("Hello", true), gpt2.tokenizer->encode("Hello", false));
}

TEST(BpeTokenizer, SpecialTokensAndEndOfGeneration) {
  ORCHARD_REQUIRE_DATA();
  const auto t = load_tokenizer("tokenizer/ggml-vocab-llama-bpe.gguf");
  const std::string text = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  const auto ids = t.tokenizer->encode(text, false, /*parse_special=*/true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 128006);
  EXPECT_EQ(ids[1], t.tokenizer->encode("user", false)[0]);
  EXPECT_EQ(ids[2], 128007);
  EXPECT_EQ(ids.back(), 128009);
  EXPECT_EQ(t.tokenizer->decode(ids, /*special=*/true), text);
  EXPECT_EQ(t.tokenizer->decode(ids), "user\n\nHi");
  const auto literal = t.tokenizer->encode(text, false, /*parse_special=*/false);
  for (TokenId id : literal) EXPECT_LT(id, 128000);
  EXPECT_EQ(t.tokenizer->decode(literal), text);

  EXPECT_TRUE(t.tokenizer->is_eog(128001));   // eos <|end_of_text|>
  EXPECT_TRUE(t.tokenizer->is_eog(128009));   // <|eot_id|>
  EXPECT_FALSE(t.tokenizer->is_eog(128000));  // BOS
  EXPECT_FALSE(t.tokenizer->is_eog(t.tokenizer->encode("Hi", false)[0]));

  const auto qwen = load_tokenizer("tokenizer/ggml-vocab-qwen2.gguf");
  EXPECT_TRUE(qwen.tokenizer->is_eog(151645));  // <|im_end|>, the eos
  EXPECT_TRUE(qwen.tokenizer->is_eog(151643));  // <|endoftext|>
  EXPECT_FALSE(qwen.tokenizer->is_eog(151644));  // <|im_start|>
  // User-defined tokens are matched even without parse_special (Hugging Face added tokens).
  const auto think = qwen.tokenizer->encode("<think>x</think>", false, false);
  EXPECT_EQ(think.front(), 151667);
  EXPECT_EQ(think.back(), 151668);
  EXPECT_EQ(qwen.tokenizer->decode(think), "<think>x</think>");
}

TEST(Utf8Streamer, HoldsBackSplitCharacters) {
  Utf8Streamer s;
  EXPECT_EQ(s.push("a\xE2"), "a");
  EXPECT_EQ(s.push("\x82"), "");
  EXPECT_EQ(s.push("\xAC" "b"), "\xE2\x82\xAC" "b");  // €b
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.push("\xA6"), "");
  EXPECT_EQ(s.push("\x99"), "\xF0\x9F\xA6\x99");  // 🦙
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Streamer, InvalidBytesBecomeReplacementCharacters) {
  Utf8Streamer s;
  EXPECT_EQ(s.push("x\xFFy"), "x\xEF\xBF\xBDy");
  EXPECT_EQ(s.push("\x80"), "\xEF\xBF\xBD");       // stray continuation byte
  EXPECT_EQ(s.push("\xE2\x41"), "\xEF\xBF\xBD" "A");  // lead byte not followed by continuation
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");  // cut off at the end
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Streamer, TokenByTokenEqualsDecode) {
  ORCHARD_REQUIRE_DATA();
  // Llama 2 spells these scripts partly in byte tokens, so characters span several tokens.
  const auto t = load_tokenizer("tokenizer/ggml-vocab-llama-spm.gguf");
  const std::string text = "нещо на Български 🚀 កាន់តែពិសេសអាច 我想在apple工作";
  const auto ids = t.tokenizer->encode(text, true);
  Utf8Streamer s;
  std::string streamed;
  bool saw_partial = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = t.tokenizer->token_to_piece(ids[i]);
    if (i == 1) piece.erase(0, 1);  // the dummy prefix, as decode() drops it
    const std::string ready = s.push(piece);
    if (ready.size() != piece.size()) saw_partial = true;
    streamed += ready;
  }
  streamed += s.flush();
  EXPECT_TRUE(saw_partial);
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(t.tokenizer->decode(ids), text);
}

// --- malformed metadata -------------------------------------------------------------------

struct MemoryGguf {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GGUFFile> file;
};

MemoryGguf make_gguf(const GGUFWriter& w) {
  MemoryGguf g;
  g.bytes = w.to_bytes();
  g.file = GGUFFile::from_memory(g.bytes, "tiny.gguf");
  return g;
}

GGUFWriter tiny_spm() {
  GGUFWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "\xE2\x96\x81" "a"});
  w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1, -2, -0.5f});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1});
  return w;
}

void expect_error_mentioning(const GGUFWriter& w, const std::string& needle) {
  try {
    auto g = make_gguf(w);
    Tokenizer::from_gguf(*g.file);
    ADD_FAILURE() << "expected an orchard::Error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, TinySpmWorks) {
  auto g = make_gguf(tiny_spm());
  auto t = Tokenizer::from_gguf(*g.file);
  EXPECT_EQ(t->encode("a a", true), (std::vector<TokenId>{1, 5, 5}));
  // 'b' has no token and no byte fallback: UNK.
  EXPECT_EQ(t->encode("ab", false), (std::vector<TokenId>{5, 0}));
}

TEST(TokenizerErrors, InconsistentOrMissingKeysAreNamed) {
  {
    GGUFWriter w = tiny_spm();
    w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0});
    expect_error_mentioning(w, "tokenizer.ggml.scores has 3 entries but tokenizer.ggml.tokens has 6");
  }
  {
    GGUFWriter w = tiny_spm();
    w.set_i32_array("tokenizer.ggml.token_type", {1, 1});
    expect_error_mentioning(w, "tokenizer.ggml.token_type");
  }
  {
    GGUFWriter w = tiny_spm();
    w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 9});
    expect_error_mentioning(w, "tokenizer.ggml.token_type[5]");
  }
  {
    GGUFWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    expect_error_mentioning(w, "tokenizer.ggml.tokens is missing");
  }
  {
    GGUFWriter w;
    w.set_string_array("tokenizer.ggml.tokens", {"a"});
    expect_error_mentioning(w, "tokenizer.ggml.model is missing");
  }
  {
    GGUFWriter w = tiny_spm();
    w.set_string("tokenizer.ggml.model", "bert");
    expect_error_mentioning(w, "'bert' is not supported");
  }
  {
    GGUFWriter w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
    expect_error_mentioning(w, "tokenizer.ggml.merges is missing");
    w.set_string_array("tokenizer.ggml.merges", {"a b", "ab"});
    expect_error_mentioning(w, "tokenizer.ggml.merges[1]");
    w.set_string_array("tokenizer.ggml.merges", {"a b"});
    w.set_string("tokenizer.ggml.pre", "no-such-pre");
    expect_error_mentioning(w, "'no-such-pre'");
  }
}

TEST(TokenizerErrors, WordPieceVocabIsRefusedClearly) {
  ORCHARD_REQUIRE_DATA();
  auto file = GGUFFile::open(test::data_file("tokenizer/ggml-vocab-bert-bge.gguf").string());
  try {
    Tokenizer::from_gguf(*file);
    ADD_FAILURE() << "bert vocab accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bert'"), std::string::npos) << e.what();
  }
}

TEST(BpeTokenizer, TinyVocabWithoutPreKeyUsesDefault) {
  GGUFWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "\xC4\xA0", "\xC4\xA0" "ab"});
  w.set_string_array("tokenizer.ggml.merges", {"a b", "\xC4\xA0 ab"});
  auto g = make_gguf(w);
  auto t = Tokenizer::from_gguf(*g.file);
  EXPECT_EQ(t->encode("ab ab", false), (std::vector<TokenId>{2, 4}));
  EXPECT_EQ(t->decode({2, 4}), "ab ab");
  EXPECT_EQ(t->bos(), -1);
}

}  // namespace
}  // namespace orchard
