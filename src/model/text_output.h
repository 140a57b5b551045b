#pragma once
// Turns generated tokens into text a client may see: whole UTF-8 characters only, and nothing
// that could still turn out to be the start of a stop string (stop strings are not shown).
// The engine's generation loop and the server's scheduler share it so both stop the same way.
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.h"

namespace orchard {

class TextOutput {
 public:
  explicit TextOutput(std::vector<std::string> stop = {}) : stop_(std::move(stop)) {}

  // Adds one token's text; returns what may be shown now (possibly empty). After a stop string
  // appears, stopped() is true and the text up to it has been returned.
  std::string push(std::string_view piece);
  // At the end: everything still held back (nothing after a stop).
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& stopped_by() const { return stopped_by_; }   // the stop string found
  const std::string& shown() const { return shown_; }   // all text returned so far

 private:
  std::vector<std::string> stop_;
  Utf8Streamer utf8_;
  std::string held_, shown_, stopped_by_;
  bool stopped_ = false;
};

}  // namespace orchard
