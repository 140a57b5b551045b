#pragma once
// Wakes the HTTP handlers of streams that got text, on a thread of its own. A wake is a futex
// system call (several µs in a VM); the scheduler's thread, which every sequence in the batch
// waits on, would otherwise make one per streamed token, sixteen per step with sixteen clients.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/stream.h"

namespace orchard::serve {

class StreamWaker {
 public:
  StreamWaker();
  ~StreamWaker();  // wakes what is still queued, then stops
  StreamWaker(const StreamWaker&) = delete;
  StreamWaker& operator=(const StreamWaker&) = delete;

  // Queues these streams' handlers to be woken and empties `streams`.
  void wake(std::vector<std::shared_ptr<Stream>>& streams);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Stream>> todo_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace orchard::serve
