// Request bodies come from anyone: malformed message content is a 400 naming the field, never
// a json exception escaping the handler (request_fuzz found "type": [...] in a content part).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "serve/request_params.h"

namespace orchard::serve {
namespace {

using nlohmann::json;

TEST(RequestParams, TextPartsJoinAndOddPartsAreABadRequest) {
  const auto ok = read_messages(json::parse(
      R"([{"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]}])"));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].content, "Hello");
  for (const char* part : {R"({"type": [{"type": "text"}], "text": "x"})", R"({"type": 3, "text": "x"})",
                           R"({"type": "image", "text": "x"})", R"({"text": "x"})", R"("x")"}) {
    const json messages = json::parse(std::string(R"([{"role": "user", "content": [)") + part + "]}]");
    try {
      read_messages(messages);
      ADD_FAILURE() << "accepted " << part;
    } catch (const ApiError& e) {
      EXPECT_NE(std::string(e.what()).find("content"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace orchard::serve
