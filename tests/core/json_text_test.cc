#include "core/json_text.h"

#include <gtest/gtest.h>

#include <random>

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

std::string Appended(std::string_view text) {
  std::string out = "[";
  AppendJsonString(out, text);
  return out;
}

TEST(AppendJsonStringTest, WritesWhatDumpJsonWrites) {
  for (const std::string& s :
       {std::string(), std::string("plain"), std::string("q\"b\\s/"),
        std::string("\b\t\n\f\r\x01\x1F\x7F", 8), std::string("\0x", 2),
        std::string("caf\xC3\xA9 \xF0\x9F\x98\x80"), std::string("\xFF"),
        std::string("x\xE2\x82"), std::string("\xE2\x82\x41"),
        std::string("\xC0\xAF"), std::string("\xED\xA0\x80"),
        std::string("\xF4\x90\x80\x80")}) {
    EXPECT_EQ(Appended(s), "[" + DumpJson(nlohmann::json(s))) << s;
  }
}

// Random bytes, mostly the ones that need care (controls, quotes, the
// bytes of multi-byte sequences, cut or not): the same text as DumpJson.
TEST(AppendJsonStringTest, AgreesWithDumpJsonOnRandomBytes) {
  const unsigned char kAlphabet[] = {'a',  '"',  '\\', '\n', 0x00, 0x1F,
                                     0x7F, 0x80, 0xBF, 0xC2, 0xC0, 0xE0,
                                     0xED, 0xA0, 0xF0, 0xF4, 0x90, 0xFF};
  std::mt19937 rng(17);
  for (int n = 0; n < 20000; ++n) {
    std::string s(rng() % 12, ' ');
    for (char& c : s) c = static_cast<char>(kAlphabet[rng() % sizeof kAlphabet]);
    ASSERT_EQ(Appended(s), "[" + DumpJson(nlohmann::json(s))) << n;
  }
}

}  // namespace
}  // namespace steps
