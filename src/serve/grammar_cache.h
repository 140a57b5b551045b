#pragma once
// Compiled grammars kept by a text key (a schema, a set of tools), the most recently used first:
// agents send the same schema or tools with every request, and compiling them is the costly part.
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "model/grammar/grammar.h"

namespace orchard::serve {

class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity) : capacity_(capacity) {}

  // The grammar kept under `key`, else make()'s, kept from then on. make() runs outside the lock;
  // what it throws passes through and nothing is kept.
  std::shared_ptr<const Grammar> get(const std::string& key, const std::function<Grammar()>& make);

 private:
  size_t capacity_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const Grammar>>> kept_;  // most recent first
};

}  // namespace orchard::serve
