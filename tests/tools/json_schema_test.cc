#include "tools/json_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace steps {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> Check(const json& schema, const json& value) {
  EXPECT_TRUE(CheckArgumentsSchema(schema).ok())
      << CheckArgumentsSchema(schema).message();
  return ValidateArguments(schema, value);
}

json Object(json properties) {
  return {{"type", "object"}, {"properties", std::move(properties)}};
}

TEST(CheckArgumentsSchemaTest, TopMustBeAnObjectSchema) {
  EXPECT_THAT(CheckArgumentsSchema(json::array()).message(),
              HasSubstr("must be a mapping"));
  EXPECT_THAT(CheckArgumentsSchema({{"type", "string"}}).message(),
              HasSubstr("'type: object' at the top"));
  EXPECT_THAT(CheckArgumentsSchema(json::object()).message(),
              HasSubstr("'type: object' at the top"));
  EXPECT_TRUE(CheckArgumentsSchema({{"type", "object"}}).ok());
}

TEST(CheckArgumentsSchemaTest, RefusesWhatItCannotCheck) {
  auto message = [](json property) {
    return CheckArgumentsSchema(Object({{"a", std::move(property)}})).message();
  };
  EXPECT_THAT(message({{"type", "strnig"}}),
              HasSubstr("parameters.properties.a.type: must be a type name"));
  EXPECT_THAT(message({{"type", json::array()}}), HasSubstr("a type name"));
  EXPECT_THAT(message({{"type", {"string", "string"}}}), HasSubstr("distinct"));
  EXPECT_THAT(message({{"minLength", -1}}), HasSubstr("non-negative integer"));
  EXPECT_THAT(message({{"minLength", 1.5}}), HasSubstr("non-negative integer"));
  EXPECT_THAT(message({{"minimum", "1"}}), HasSubstr("must be a number"));
  EXPECT_THAT(message({{"enum", json::array()}}), HasSubstr("non-empty list"));
  EXPECT_THAT(message({{"pattern", "(unclosed"}}),
              HasSubstr("not a valid regular expression"));
  EXPECT_THAT(message({{"pattern", std::string(kMaxPatternBytes + 1, 'a')}}),
              HasSubstr("longer than"));
  EXPECT_THAT(message({{"pattern", "(?<!x)y"}}),
              HasSubstr("lookaround are not supported"));
  EXPECT_THAT(message({{"format", "email"}}),
              HasSubstr("unknown keyword 'format'"));
  EXPECT_THAT(message("string"), HasSubstr("a schema must be a mapping"));
  EXPECT_THAT(
      CheckArgumentsSchema(
          {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}})
          .message(),
      HasSubstr("true or false"));
  EXPECT_THAT(CheckArgumentsSchema({{"type", "object"}, {"required", {"a", 1}}})
                  .message(),
              HasSubstr("list of names"));
  // Annotations are accepted and ignored.
  EXPECT_TRUE(CheckArgumentsSchema(Object({{"a",
                                            {{"description", "x"},
                                             {"title", "y"},
                                             {"default", 3},
                                             {"examples", {1, 2}}}}}))
                  .ok());
}

TEST(CheckArgumentsSchemaTest, DepthIsBoundedAtTheEdge) {
  auto nested = [](int levels) {
    json schema = {{"type", "string"}};
    for (int i = 0; i < levels; ++i) schema = {{"items", schema}};
    return json{{"type", "object"}, {"properties", {{"a", schema}}}};
  };
  // properties.a is level 1; each items adds one.
  EXPECT_TRUE(CheckArgumentsSchema(nested(kMaxSchemaDepth - 1)).ok());
  EXPECT_THAT(CheckArgumentsSchema(nested(kMaxSchemaDepth)).message(),
              HasSubstr("nested deeper than"));
}

TEST(ValidateArgumentsTest, TypesNameThePathAndTheRule) {
  json schema = Object({{"count", {{"type", "integer"}}},
                        {"ratio", {{"type", "number"}}},
                        {"name", {{"type", {"string", "null"}}}}});
  EXPECT_THAT(Check(schema, {{"count", "3"}}),
              ElementsAre("argument \"count\": expected integer, got string"));
  EXPECT_THAT(Check(schema, {{"count", 2.5}}),
              ElementsAre("argument \"count\": expected integer, got number"));
  EXPECT_THAT(Check(schema, {{"count", 2.0}}), IsEmpty());  // A whole number.
  EXPECT_THAT(Check(schema, {{"ratio", true}}),
              ElementsAre("argument \"ratio\": expected number, got boolean"));
  EXPECT_THAT(Check(schema, {{"ratio", 7}}), IsEmpty());
  EXPECT_THAT(Check(schema, {{"name", nullptr}}), IsEmpty());
  EXPECT_THAT(
      Check(schema, {{"name", 1}}),
      ElementsAre("argument \"name\": expected string or null, got integer"));
  EXPECT_THAT(ValidateArguments({{"type", "object"}}, json::array()),
              ElementsAre("the arguments: expected object, got array"));
}

TEST(ValidateArgumentsTest, RequiredAndAdditionalProperties) {
  json schema = Object({{"path", {{"type", "string"}}}});
  schema["required"] = {"path"};
  schema["additionalProperties"] = false;
  EXPECT_THAT(Check(schema, json::object()),
              ElementsAre("the arguments: missing required argument \"path\""));
  EXPECT_THAT(Check(schema, {{"path", "a"}, {"p ath=x", 1}}),
              ElementsAre("argument \"p ath=x\": unexpected argument "
                          "(allowed: path)"));
  schema.erase("additionalProperties");
  EXPECT_THAT(Check(schema, {{"path", "a"}, {"other", 1}}), IsEmpty());
}

TEST(ValidateArgumentsTest, BoundsAtTheirEdges) {
  json schema =
      Object({{"n", {{"type", "integer"}, {"minimum", 1}, {"maximum", 3}}},
              {"s", {{"type", "string"}, {"minLength", 2}, {"maxLength", 3}}},
              {"l",
               {{"type", "array"},
                {"minItems", 1},
                {"maxItems", 2},
                {"items", {{"type", "string"}}}}}});
  EXPECT_THAT(Check(schema, {{"n", 1}, {"s", "ab"}, {"l", {"x"}}}), IsEmpty());
  EXPECT_THAT(Check(schema, {{"n", 3}, {"s", "abc"}, {"l", {"x", "y"}}}),
              IsEmpty());
  EXPECT_THAT(Check(schema, {{"n", 0}}),
              ElementsAre("argument \"n\": must be at least 1, not 0"));
  EXPECT_THAT(Check(schema, {{"n", 4}}),
              ElementsAre("argument \"n\": must be at most 3, not 4"));
  EXPECT_THAT(Check(schema, {{"s", "a"}}),
              ElementsAre("argument \"s\": must be at least 2 characters "
                          "long, not 1"));
  EXPECT_THAT(Check(schema, {{"s", "abcd"}}),
              ElementsAre("argument \"s\": must be at most 3 characters "
                          "long, not 4"));
  // Lengths count characters, not bytes: three two-byte characters.
  EXPECT_THAT(Check(schema, {{"s", "\xC3\xA9\xC3\xA9\xC3\xA9"}}), IsEmpty());
  EXPECT_THAT(Check(schema, {{"l", json::array()}}),
              ElementsAre("argument \"l\": must hold at least 1 items, not 0"));
  EXPECT_THAT(Check(schema, {{"l", {"x", 2}}}),
              ElementsAre("argument \"l[1]\": expected string, got integer"));
}

TEST(ValidateArgumentsTest, EnumAndNestedPaths) {
  json schema = Object({{"mode", {{"enum", {"fast", "slow"}}}},
                        {"opts", Object({{"level", {{"type", "integer"}}}})}});
  EXPECT_THAT(Check(schema, {{"mode", "fast"}}), IsEmpty());
  EXPECT_THAT(Check(schema, {{"mode", "quick"}}),
              ElementsAre("argument \"mode\": must be one of \"fast\", "
                          "\"slow\", not \"quick\""));
  EXPECT_THAT(Check(schema, {{"opts", {{"level", "high"}}}}),
              ElementsAre("argument \"opts.level\": expected integer, got "
                          "string"));
}

TEST(ValidateArgumentsTest, PatternIsSearchedAndGuarded) {
  json schema = Object({{"id", {{"type", "string"}, {"pattern", "^[a-z]+$"}}},
                        {"has", {{"type", "string"}, {"pattern", "x"}}}});
  EXPECT_THAT(Check(schema, {{"id", "abc"}, {"has", "axb"}}), IsEmpty());
  EXPECT_THAT(Check(schema, {{"id", "ab1"}}),
              ElementsAre("argument \"id\": does not match pattern "
                          "\"^[a-z]+$\""));
  // Any length is matched, in linear time: 1 MiB against an expression a
  // backtracking engine would take exponential time (or stack) on.
  EXPECT_THAT(Check(schema, {{"id", std::string(1 << 20, 'a')}}), IsEmpty());
  json nested = Object({{"id", {{"type", "string"}, {"pattern", "^(a+)+$"}}}});
  EXPECT_THAT(Check(nested, {{"id", std::string(100000, 'a') + "!"}}),
              ElementsAre(HasSubstr("does not match pattern")));
}

TEST(ValidateArgumentsTest, ErrorsAreCappedAndHostileNamesQuoted) {
  json schema = Object(json::object());
  schema["additionalProperties"] = false;
  json args = json::object();
  for (int i = 0; i < 50; ++i) args["k" + std::to_string(i)] = i;
  EXPECT_EQ(ValidateArguments(schema, args).size(), 10u);
  EXPECT_EQ(ValidateArguments(schema, args, 3).size(), 3u);
  // A name with a quote and a newline is escaped, not spliced raw.
  EXPECT_THAT(ValidateArguments(schema, {{"a\"\nb", 1}}),
              ElementsAre("argument \"a\\\"\\nb\": unexpected argument "
                          "(allowed: none)"));
  // Invalid UTF-8 in a name never throws.
  EXPECT_THAT(ValidateArguments(schema, {{"\xff", 1}}),
              ElementsAre(HasSubstr("unexpected argument")));
}

}  // namespace
}  // namespace steps
