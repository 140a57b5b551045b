#include "model/text_output.h"

#include <algorithm>

namespace orchard {

std::string TextOutput::push(std::string_view piece) {
  if (stopped_) return {};
  held_ += utf8_.push(piece);
  size_t safe = held_.size();
  for (const auto& s : stop_) {
    if (s.empty()) continue;
    if (auto at = held_.find(s); at != std::string::npos) {
      held_.resize(at);
      stopped_ = true;
      stopped_by_ = s;
      safe = held_.size();
      break;
    }
    // A suffix of the held text that is a prefix of a stop string must wait for more tokens.
    for (size_t k = std::min(s.size() - 1, held_.size()); k > 0; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        safe = std::min(safe, held_.size() - k);
        break;
      }
  }
  std::string out = held_.substr(0, safe);
  held_.erase(0, safe);
  shown_ += out;
  return out;
}

std::string TextOutput::flush() {
  if (stopped_) return {};
  std::string out = held_ + utf8_.flush();
  held_.clear();
  shown_ += out;
  return out;
}

}  // namespace orchard
