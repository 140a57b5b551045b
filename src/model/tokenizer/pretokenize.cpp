#include "model/tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>
#include <initializer_list>

#include "model/tokenizer/utf8.h"
#include "tensor/error.h"

namespace orchard {

namespace {

// GPT-2's pattern: contractions, letters, digits, other symbols, each with one optional leading
// space; whitespace runs give their last space to the following word.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3 (tiktoken cl100k style): case-insensitive contractions, digits in groups of up to three.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but every digit on its own.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// CJK ideographs, everything from U+0800 up to them, and Hangul: DeepSeek isolates these runs.
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// DeepSeek LLM's explicit list of cased letters (Unicode Lu/Ll/Lt), taken from its tokenizer.json.
constexpr const char* kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})"
    R"(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3})"
    R"(\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D})"
    R"(\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184})"
    R"(\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})"
    R"(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF})"
    R"(\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
    R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr const char* kDeepseekPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

struct PreTokenizerSpec {
  std::initializer_list<const char*> names;
  std::initializer_list<const char*> regexes;
  bool ignore_merges = false;
  bool adds_bos = false;
};

const PreTokenizerSpec kSpecs[] = {
    {{"default", ""},
     {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"}},
    {{"gpt-2", "mpt", "phi-2", "olmo", "jais", "roberta-bpe", "jina-es", "jina-de", "jina-v1-en",
      "jina-v2-es", "jina-v2-de", "jina-v2-code"},
     {kGpt2}},
    {{"llama-bpe", "llama3", "llama-v3", "falcon3"}, {kLlama3}, true, true},
    {{"dbrx", "smaug-bpe"}, {kLlama3}},
    {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, {kQwen2}},
    {{"deepseek-llm"},
     {R"([\r\n])", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"}},
    {{"deepseek-coder"},
     {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
    {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, R"([0-9][0-9][0-9])"}},
    {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
     {R"(\p{N})", kGpt2}},
};

}  // namespace

// One compiled PCRE2 pattern. The compiled code is read-only after construction, so split() may
// run on many threads at once; each call brings its own match data.
class PreTokenizer::Regex {
 public:
  explicit Regex(const char* pattern) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    // MATCH_INVALID_UTF: arbitrary bytes are legal input; invalid sequences simply never match
    // and so stay in the gaps. DOLLAR_ENDONLY: '$' means the end of the fragment, as in
    // ECMAScript and Hugging Face's regex engines, not "before a final newline".
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                          &error, &error_offset, nullptr);
    if (!code_) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw Error(std::string("pre-tokenizer regex does not compile at offset ") +
                  std::to_string(error_offset) + ": " + reinterpret_cast<char*>(message));
    }
    // JIT is several times faster; the interpreter gives the same matches if JIT is unavailable.
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the matches of this regex in `text` and the text between them to `out`.
  void split(std::string_view text, pcre2_match_data* match, std::vector<std::string_view>& out) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t start = 0, emitted = 0;
    while (start < text.size()) {
      int rc = pcre2_match(code_, subject, text.size(), start, 0, match, nullptr);
      // The JIT's fixed stack can run out on pathological input; the interpreter grows its own.
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(code_, subject, text.size(), start, PCRE2_NO_JIT, match, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        throw Error(std::string("pre-tokenizer regex match failed: ") +
                    reinterpret_cast<char*>(message));
      }
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
      const size_t begin = ovector[0], end = ovector[1];
      if (end == begin) {  // none of our patterns matches empty, but never loop forever
        start = begin + utf8::sequence_length(static_cast<uint8_t>(text[begin]));
        continue;
      }
      if (begin > emitted) out.push_back(text.substr(emitted, begin - emitted));
      out.push_back(text.substr(begin, end - begin));
      emitted = start = end;
    }
    if (emitted < text.size()) out.push_back(text.substr(emitted));
  }

  pcre2_code* code() const { return code_; }

 private:
  pcre2_code* code_ = nullptr;
};

PreTokenizer::PreTokenizer(const std::string& name, const std::string& file) : name_(name) {
  for (const PreTokenizerSpec& spec : kSpecs) {
    for (const char* candidate : spec.names) {
      if (name != candidate) continue;
      for (const char* pattern : spec.regexes) stages_.push_back(std::make_unique<Regex>(pattern));
      ignore_merges_ = spec.ignore_merges;
      adds_bos_ = spec.adds_bos;
      if (name.empty())
        std::fprintf(stderr, "%s: tokenizer.ggml.pre is absent; using the 'default' pre-tokenizer\n",
                     file.c_str());
      return;
    }
  }
  throw Error(file + ": tokenizer.ggml.pre '" + name +
              "' is not a pre-tokenizer this build knows (see model/tokenizer/pretokenize.h)");
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& stage : stages_) {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(stage->code(), nullptr);
    if (!match) throw Error("pre-tokenizer: out of memory for PCRE2 match data");
    next.clear();
    try {
      for (std::string_view piece : pieces) stage->split(piece, match, next);
    } catch (...) {
      pcre2_match_data_free(match);
      throw;
    }
    pcre2_match_data_free(match);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace orchard
