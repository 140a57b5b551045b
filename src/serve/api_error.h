#pragma once
// An error a request gets back: the HTTP status and the fields of OpenAI's error object
// (the Ollama and Anthropic adapters reshape it into their own).
#include <string>

#include "tensor/error.h"

namespace orchard::serve {

class ApiError : public Error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = {}, std::string code = {})
      : Error(message), status_(status), type_(std::move(type)), param_(std::move(param)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // For a 429: seconds until a retry may succeed (the Retry-After header).
  int retry_after_s() const { return retry_after_s_; }
  ApiError& retry_after(int seconds) {
    retry_after_s_ = seconds;
    return *this;
  }

  static ApiError bad_request(const std::string& message, const std::string& param = {}) {
    return ApiError(400, "invalid_request_error", message, param);
  }

 private:
  int status_;
  std::string type_, param_, code_;
  int retry_after_s_ = 1;
};

}  // namespace orchard::serve
