#pragma once
// A parsed Jinja template (the subset chat templates use; see docs in chat_template.h) and
// rendering it with a set of global variables given as JSON.
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "serve/jinja/limits.h"

namespace orchard::serve::jinja {

struct Stmt;

class Template {
 public:
  // Throws orchard::Error "chat template line N: …" when the text does not parse.
  static Template parse(std::string_view source, const Limits& limits = {});

  // `globals` must be a JSON object: its members become the template's variables. `now` is
  // what strftime_now() formats. Throws RaisedError when the template calls
  // raise_exception(), orchard::Error "chat template line N: …" for any other failure
  // (unknown filter, type error, or one of the Limits exceeded).
  std::string render(const nlohmann::ordered_json& globals, const std::tm& now) const;

  const Limits& limits() const { return limits_; }

 private:
  struct Program;
  std::shared_ptr<const Program> program_;
  Limits limits_;
};

}  // namespace orchard::serve::jinja
