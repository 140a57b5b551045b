#pragma once
// Bounds on what one template may cost, and the failure the interpreter throws inside itself.
// Chat templates come from model files, which may be hostile: every bound here turns a
// runaway template into an error instead of a hang, a crash or unbounded memory.
#include <cstddef>
#include <string>
#include <utility>

#include "tensor/error.h"

namespace orchard::serve::jinja {

struct Limits {
  size_t max_source = 1 << 20;     // bytes of template text
  size_t max_output = 4 << 20;     // bytes of rendered text
  size_t max_steps = 2'000'000;    // evaluations, loop iterations, references followed
  size_t max_bytes = 64 << 20;     // bytes of strings and list slots made while rendering
  int max_depth = 100;             // nesting of the template's syntax and of values
  int max_calls = 10;              // macros calling macros (each level recurses the interpreter)
};

// Thrown inside the lexer, parser and interpreter; Template turns it into an orchard::Error
// that names the template line. `raised` marks raise_exception() from the template itself.
struct Failure {
  std::string message;
  int line = 0;
  bool raised = false;
};

[[noreturn]] inline void fail(std::string message, int line = 0) {
  throw Failure{std::move(message), line, false};
}

// The template called raise_exception(message): it refuses these messages on purpose.
class RaisedError : public orchard::Error {
 public:
  explicit RaisedError(const std::string& what) : orchard::Error(what) {}
};

}  // namespace orchard::serve::jinja
