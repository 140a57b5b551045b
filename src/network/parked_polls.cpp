#include "network/parked_polls.h"

namespace orchard::network {

void ParkedPolls::erase(std::unordered_map<std::string, Parked>::iterator it) {
  by_deadline_.erase({it->second.deadline, it->first});
  by_node_.erase(it);
}

serve::ReplyPtr ParkedPolls::park(const std::string& node, Clock::time_point deadline, serve::ReplyPtr reply) {
  std::lock_guard lock(mu_);
  serve::ReplyPtr older;
  if (auto it = by_node_.find(node); it != by_node_.end()) {
    older = std::move(it->second.reply);
    erase(it);
  }
  by_node_.emplace(node, Parked{std::move(reply), deadline});
  by_deadline_.emplace(deadline, node);
  return older;
}

serve::ReplyPtr ParkedPolls::take(const std::string& node) {
  std::lock_guard lock(mu_);
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return nullptr;
  serve::ReplyPtr r = std::move(it->second.reply);
  erase(it);
  return r;
}

void ParkedPolls::forget(const std::string& node, const serve::Reply* reply) {
  std::lock_guard lock(mu_);
  auto it = by_node_.find(node);
  if (it != by_node_.end() && it->second.reply.get() == reply) erase(it);
}

std::vector<serve::ReplyPtr> ParkedPolls::take_due(Clock::time_point now) {
  std::lock_guard lock(mu_);
  std::vector<serve::ReplyPtr> out;
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
    auto it = by_node_.find(by_deadline_.begin()->second);
    out.push_back(std::move(it->second.reply));
    erase(it);
  }
  return out;
}

std::vector<serve::ReplyPtr> ParkedPolls::take_all() {
  std::lock_guard lock(mu_);
  std::vector<serve::ReplyPtr> out;
  for (auto& [node, p] : by_node_) out.push_back(std::move(p.reply));
  by_node_.clear();
  by_deadline_.clear();
  return out;
}

size_t ParkedPolls::size() const {
  std::lock_guard lock(mu_);
  return by_node_.size();
}

}  // namespace orchard::network
