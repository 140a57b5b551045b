#include "model/tokenizer/tokenizer.h"

#include "model/gguf.h"
#include "model/tokenizer/bpe.h"
#include "model/tokenizer/spm.h"
#include "model/tokenizer/utf8.h"
#include "tensor/error.h"

namespace orchard {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GGUFFile& file) {
  const auto model = file.get_string("tokenizer.ggml.model");
  if (!model) throw Error(file.path() + ": tokenizer.ggml.model is missing");
  if (*model == "llama") return std::make_unique<SpmTokenizer>(file);
  if (*model == "gpt2") return std::make_unique<BpeTokenizer>(file);
  throw Error(file.path() + ": tokenizer.ggml.model '" + *model +
              "' is not supported (supported: 'llama' = SentencePiece BPE, 'gpt2' = byte-level "
              "BPE)");
}

std::string Utf8Streamer::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string ready;
  size_t i = 0;
  while (i < pending_.size()) {
    size_t len = 1;
    const auto kind = utf8::classify(std::string_view(pending_).substr(i), &len);
    if (kind == utf8::Prefix::Incomplete) break;  // the next token may complete it
    if (kind == utf8::Prefix::Invalid)
      ready += utf8::kReplacementChar;
    else
      ready.append(pending_, i, len);
    i += len;
  }
  pending_.erase(0, i);
  return ready;
}

std::string Utf8Streamer::flush() {
  std::string out = push("");
  // What is left is a cut-off character that will never be completed.
  if (!pending_.empty()) out += utf8::kReplacementChar;
  pending_.clear();
  return out;
}

}  // namespace orchard
