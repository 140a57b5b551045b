#pragma once
// A request target ("/v1/jobs/job-1?wait=5&q=a%20b") as cpp-httplib's Request holds it: the
// path with its %XX escapes decoded, and the query's name=value pairs decoded ('+' is a space
// there only). What the event server does with each request line it reads; fuzzed by
// fuzz/http_request_fuzz with Beast's parser in front.
#include <httplib.h>

#include <string>
#include <string_view>

namespace orchard::serve {

// Sets req.target, req.path and req.params from `target`. Never throws: a malformed escape is
// kept as it is.
void set_target(httplib::Request& req, std::string_view target);

// %XX escapes decoded (a malformed one kept as it is); '+' becomes a space when `plus_is_space`.
std::string url_decode(std::string_view s, bool plus_is_space);

}  // namespace orchard::serve
