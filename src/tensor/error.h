#pragma once
// The one error type: its message names what failed and where, e.g.
//   "model.gguf: tensor 'blk.3.attn_q.weight' has type 31 (unsupported)".
// Errors cross process boundaries as a message and a non-zero exit, never as a crash.
#include <stdexcept>
#include <string>

namespace orchard {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace orchard
