#pragma once
// Reading a server-sent-event stream in tests of the HTTP servers (serve, the coordinator).
#include <string>
#include <vector>

namespace orchard::test {

// The data lines of a server-sent-event stream, in order ("[DONE]" included).
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

}  // namespace orchard::test
