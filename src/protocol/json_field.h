#pragma once
// Reading one required field of an untrusted JSON object (a peer's message, a proof, a ledger
// line): a missing or mistyped field is an orchard::Error naming what was being read and the
// key, never nlohmann's own exception text; integers must fit exactly (exact_get).

#include <string>

#include <nlohmann/json.hpp>

#include "model/json_number.h"
#include "tensor/error.h"

namespace orchard::protocol {

template <class T>
T required_field(const nlohmann::json& j, const char* what, const char* key) {
  if (!j.is_object()) throw Error(std::string(what) + ": expected a JSON object");
  const auto it = j.find(key);
  if (it == j.end()) throw Error(std::string(what) + ": '" + key + "' is missing");
  try {
    return exact_get<T>(*it);
  } catch (const nlohmann::json::out_of_range&) {
    throw Error(std::string(what) + ": '" + key + "' is out of range (" + it->dump() + ")");
  } catch (const nlohmann::json::exception&) {
    throw Error(std::string(what) + ": '" + key + "' has the wrong type (" + it->type_name() + ")");
  }
}

}  // namespace orchard::protocol
