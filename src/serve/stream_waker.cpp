#include "serve/stream_waker.h"

#include "serve/server.h"

namespace orchard::serve {

StreamWaker::StreamWaker() : thread_([this] { loop(); }) {}

StreamWaker::~StreamWaker() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void StreamWaker::wake(std::vector<std::shared_ptr<Stream>>& streams) {
  if (streams.empty()) return;
  {
    std::lock_guard lock(mu_);
    if (todo_.empty()) todo_.swap(streams);
    else todo_.insert(todo_.end(), streams.begin(), streams.end());
  }
  streams.clear();
  cv_.notify_one();
}

void StreamWaker::loop() {
  // Its wakes feed the connection threads, which yield to the engine: so does this.
  lower_this_thread();
  std::vector<std::shared_ptr<Stream>> batch;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !todo_.empty(); });
      if (todo_.empty()) return;
      batch.swap(todo_);
    }
    for (auto& s : batch) s->wake();
    batch.clear();
  }
}

}  // namespace orchard::serve
