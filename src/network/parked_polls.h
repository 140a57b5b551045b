#pragma once
// Nodes' long-polls for work, parked with no thread while they wait (serve/event_server.h): the
// coordinator's dispatcher answers a node's poll when an attempt is assigned to it, and with 204
// at its deadline. One per node: a node polls once at a time, so a newer poll replaces an older
// one (which is answered 204: the node stopped waiting for it).
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "serve/event_server.h"

namespace orchard::network {

class ParkedPolls {
 public:
  using Clock = std::chrono::steady_clock;

  // Parks `reply` until `deadline`; returns the poll it replaced, if any (to answer 204).
  serve::ReplyPtr park(const std::string& node, Clock::time_point deadline, serve::ReplyPtr reply);
  // The node's parked poll, taken out (null when none).
  serve::ReplyPtr take(const std::string& node);
  // Drops `reply` if it is still the node's parked poll (its client hung up).
  void forget(const std::string& node, const serve::Reply* reply);
  // The polls whose deadline passed, taken out.
  std::vector<serve::ReplyPtr> take_due(Clock::time_point now);
  std::vector<serve::ReplyPtr> take_all();
  size_t size() const;

 private:
  struct Parked {
    serve::ReplyPtr reply;
    Clock::time_point deadline;
  };
  void erase(std::unordered_map<std::string, Parked>::iterator it);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Parked> by_node_;
  std::set<std::pair<Clock::time_point, std::string>> by_deadline_;
};

}  // namespace orchard::network
