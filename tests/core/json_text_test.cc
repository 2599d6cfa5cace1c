#include "core/json_text.h"

#include <gtest/gtest.h>

#include "core/utf8.h"

namespace steps {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(DumpJsonTest, WritesValidTextAsDumpDoes) {
  nlohmann::json j = {{"text", "caf\xC3\xA9"}, {"n", 1}};
  EXPECT_EQ(DumpJson(j), j.dump());
  EXPECT_EQ(DumpJson(j, 2), j.dump(2));
}

// dump() throws type_error 316 here; DumpJson writes U+FFFD and the result
// parses strictly.
TEST(DumpJsonTest, ReplacesInvalidUtf8InsteadOfThrowing) {
  nlohmann::json j = {{"out\xFF", {"a\xFF\xFE", "ok", "x\xE2\x82"}}};
  ASSERT_THROW(j.dump(), nlohmann::json::type_error);
  std::string text;
  ASSERT_NO_THROW(text = DumpJson(j));
  EXPECT_TRUE(IsValidUtf8(text));
  nlohmann::json back = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(back.is_discarded()) << text;
  EXPECT_EQ(back["out" + kFffd][0], "a" + kFffd + kFffd);
  EXPECT_EQ(back["out" + kFffd][1], "ok");
}

TEST(IsValidUtf8Test, AgreesWithSanitize) {
  for (const std::string& s :
       {std::string("plain"), std::string("caf\xC3\xA9"), std::string("\xFF"),
        std::string("\xC0\xAF"), std::string("\xED\xA0\x80"),
        std::string("x\xE2\x82"), std::string()}) {
    EXPECT_EQ(IsValidUtf8(s), SanitizeUtf8(s) == s) << s;
  }
}

}  // namespace
}  // namespace steps
