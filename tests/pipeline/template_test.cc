#include "pipeline/template.h"

#include <gtest/gtest.h>

namespace steps::pipeline {
namespace {

TEST(TemplateTest, RendersPathsAndPipes) {
  nlohmann::json ctx = {{"version", {{"ref", "v1"}, {"n", 3}}},
                        {"params", {{"a", true}}}};
  EXPECT_EQ(*RenderTemplate("ref={{ .version.ref }}", ctx), "ref=v1");
  EXPECT_EQ(*RenderTemplate("{{.version.ref|shellquote}}", ctx), "'v1'");
  EXPECT_EQ(*RenderTemplate("{{ .version.n }}", ctx), "3");
  EXPECT_EQ(*RenderTemplate("{{ .params | json }}", ctx), "{\"a\":true}");
  EXPECT_EQ(*RenderTemplate("no braces", ctx), "no braces");
}

TEST(TemplateTest, ErrorsNameTheProblem) {
  nlohmann::json ctx = {{"version", {{"ref", "v1"}}}};
  EXPECT_NE(RenderTemplate("{{ .version.nope }}", ctx)
                .status()
                .message()
                .find(".version.nope"),
            std::string::npos);
  EXPECT_NE(RenderTemplate("{{ .version.ref | upper }}", ctx)
                .status()
                .message()
                .find("upper"),
            std::string::npos);
  EXPECT_FALSE(RenderTemplate("{{ .version.ref", ctx).ok());
  EXPECT_FALSE(RenderTemplate("{{ version }}", ctx).ok());
  EXPECT_FALSE(RenderTemplate("{{ .a..b }}", ctx).ok());
}

TEST(TemplateTest, ShellQuoteIsSafeForAnyValue) {
  for (std::string hostile :
       {"plain", "with space", "it's", "$(id)", "`id`", "a\nb", "\"dq\"", "'",
        "''", "\\", "-rf", "$HOME", "; rm -rf /", ""}) {
    std::string cmd = "printf '%s' " + ShellQuote(hostile);
    FILE* p = popen(("bash -c " + ShellQuote(cmd)).c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string got;
    char buf[256];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) got.append(buf, n);
    pclose(p);
    EXPECT_EQ(got, hostile);
  }
}

TEST(TemplateTest, NulBytesAreRefusedForShellQuote) {
  nlohmann::json ctx = {{"v", std::string("a\0b", 3)}};
  EXPECT_FALSE(RenderTemplate("{{ .v | shellquote }}", ctx).ok());
}

TEST(TemplateTest, RootsLeaveForeignBracesAlone) {
  nlohmann::json ctx = {{"target", "x"}};
  auto r = RenderTemplateRoots(
      "echo {{ .target }} {{ .Other }} {{ not a template }}", ctx, {"target"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "echo x {{ .Other }} {{ not a template }}");
}

TEST(TemplateTest, ValuesThatAreNotUtf8RenderAsJson) {
  // Found by fuzz/template: the JSON writer threw on the byte 0xFF.
  nlohmann::json ctx = {{"params", {{"path", "\xff"}}}};
  auto r = RenderTemplate("{{ .params | json }} {{ .params }}", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "{\"path\":\"\xEF\xBF\xBD\"} {\"path\":\"\xEF\xBF\xBD\"}");
}

TEST(TemplateTest, LiteralsRenderAsWrittenInBothModes) {
  nlohmann::json ctx = {{"v", "x"}};
  EXPECT_EQ(*RenderTemplate("a {{ \"{{\" }} b", ctx), "a {{ b");
  auto r =
      RenderTemplateRoots("-f '{{ \"{{\" }} .State }}' {{ .v }}", ctx, {"v"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "-f '{{ .State }}' x");
}

TEST(TemplateTest, ScanListsExpressionsWithTheirLines) {
  auto all =
      ScanTemplate("a\n{{ .v | json | shellquote }}\n{{ \"x\" }}", false);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].written, "{{ .v | json | shellquote }}");
  EXPECT_EQ((*all)[0].path, std::vector<std::string>{"v"});
  EXPECT_EQ((*all)[0].pipes, (std::vector<std::string>{"json", "shellquote"}));
  EXPECT_EQ((*all)[0].line_offset, 1);
  EXPECT_TRUE((*all)[1].literal);
  EXPECT_EQ((*all)[1].line_offset, 2);
  // Mixed text: only braces starting with '.' or '"' are ours.
  auto mixed = ScanTemplate("{{ not ours }} {{ .v }} {{ unclosed", true);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->size(), 1u);
  EXPECT_FALSE(ScanTemplate("{{ .v | upper }}", true).ok());
  EXPECT_FALSE(ScanTemplate("{{ unclosed", false).ok());
  EXPECT_FALSE(ScanTemplate("{{ not ours }}", false).ok());
}

}  // namespace
}  // namespace steps::pipeline
