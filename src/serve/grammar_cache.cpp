#include "serve/grammar_cache.h"

namespace orchard::serve {

std::shared_ptr<const Grammar> GrammarCache::get(const std::string& key, const std::function<Grammar()>& make) {
  {
    std::lock_guard lock(mu_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (it->first == key) {
        kept_.splice(kept_.begin(), kept_, it);
        return it->second;
      }
  }
  auto grammar = std::make_shared<const Grammar>(make());
  std::lock_guard lock(mu_);
  kept_.emplace_front(key, grammar);
  if (kept_.size() > capacity_) kept_.pop_back();
  return grammar;
}

}  // namespace orchard::serve
