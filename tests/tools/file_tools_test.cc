#include "tools/file_tools.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "process/local_launcher.h"
#include "tools/registry.h"
#include "tools_test_util.h"

namespace steps {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class FileToolsTest : public ::testing::Test {
 protected:
  FileToolsTest() : context_(tree_.root(), RealClock(), launcher_) {}

  std::string InRoot(const std::string& rel) const {
    return tree_.root() + "/" + rel;
  }

  ScratchTree tree_;
  LocalProcessLauncher launcher_;
  ToolContext context_;
  ReadFileTool read_;
  WriteFileTool write_;
  ListFilesTool list_;
};

TEST_F(FileToolsTest, WriteThenRead) {
  ToolResult w =
      write_.Execute({{"path", "notes.txt"}, {"content", "hello\n"}}, context_);
  EXPECT_FALSE(w.is_error) << w.content;
  EXPECT_EQ(w.content, "wrote 6 bytes to 'notes.txt'");
  ToolResult r = read_.Execute({{"path", "notes.txt"}}, context_);
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.content, "hello\n");
}

TEST_F(FileToolsTest, WriteCreatesParentsAndReplaces) {
  EXPECT_FALSE(
      write_.Execute({{"path", "x/y/z.txt"}, {"content", "one"}}, context_)
          .is_error);
  EXPECT_FALSE(
      write_.Execute({{"path", "x/y/z.txt"}, {"content", "2"}}, context_)
          .is_error);
  EXPECT_EQ(ScratchTree::Read(InRoot("x/y/z.txt")), "2");
}

TEST_F(FileToolsTest, WriteKeepsNulBytesInContent) {
  std::string content("a\0b", 3);
  EXPECT_FALSE(write_.Execute({{"path", "bin"}, {"content", content}}, context_)
                   .is_error);
  EXPECT_EQ(ScratchTree::Read(InRoot("bin")), content);
}

TEST_F(FileToolsTest, ReadErrorsAreResults) {
  ToolResult missing = read_.Execute({{"path", "nope.txt"}}, context_);
  EXPECT_TRUE(missing.is_error);
  EXPECT_EQ(missing.content, "read_file: 'nope.txt' does not exist");
  std::filesystem::create_directory(InRoot("dir"));
  ToolResult dir = read_.Execute({{"path", "dir"}}, context_);
  EXPECT_TRUE(dir.is_error);
  EXPECT_THAT(dir.content, HasSubstr("is a directory"));
  ToolResult write_dir =
      write_.Execute({{"path", "dir"}, {"content", "x"}}, context_);
  EXPECT_TRUE(write_dir.is_error);
  EXPECT_THAT(write_dir.content, HasSubstr("is a directory"));
  ToolResult slash =
      write_.Execute({{"path", "newdir/"}, {"content", "x"}}, context_);
  EXPECT_TRUE(slash.is_error);
  EXPECT_THAT(slash.content, HasSubstr("ends with '/'"));
  EXPECT_FALSE(std::filesystem::exists(InRoot("newdir")));
  ScratchTree::Write(InRoot("file"), "f");
  ToolResult through_file = read_.Execute({{"path", "file/x"}}, context_);
  EXPECT_TRUE(through_file.is_error);
  EXPECT_THAT(through_file.content, HasSubstr("not a directory"));
}

TEST_F(FileToolsTest, HostileArguments) {
  struct Case {
    nlohmann::json args;
    std::string want;
  };
  std::vector<Case> cases = {
      {nlohmann::json::array({"a"}), "must be a JSON object, not array"},
      {"notes.txt", "must be a JSON object, not string"},
      {nullptr, "must be a JSON object, not null"},
      {nlohmann::json::object(), "missing required argument 'path'"},
      {{{"path", 42}}, "argument 'path' must be a string, not number"},
      {{{"path", {{"nested", true}}}}, "must be a string, not object"},
      {{{"path", ""}}, "the path is empty"},
  };
  for (const Case& c : cases) {
    ToolResult r = read_.Execute(c.args, context_);
    EXPECT_TRUE(r.is_error) << c.args.dump();
    EXPECT_THAT(r.content, HasSubstr(c.want)) << c.args.dump();
  }
  ToolResult no_content = write_.Execute({{"path", "a"}}, context_);
  EXPECT_THAT(no_content.content,
              HasSubstr("missing required argument 'content'"));
  ToolResult bad_content =
      write_.Execute({{"path", "a"}, {"content", {1, 2}}}, context_);
  EXPECT_THAT(bad_content.content, HasSubstr("must be a string, not array"));
  EXPECT_FALSE(std::filesystem::exists(InRoot("a")));
  // Extra keys are ignored.
  EXPECT_FALSE(
      write_.Execute({{"path", "a"}, {"content", "x"}, {"mode", 7}}, context_)
          .is_error);
}

TEST_F(FileToolsTest, ArgumentsAsJsonText) {
  ScratchTree::Write(InRoot("a.txt"), "A");
  EXPECT_EQ(read_.ExecuteJson(R"({"path": "a.txt"})", context_).content, "A");
  ToolResult bad = read_.ExecuteJson(R"({"path": "a.txt")", context_);
  EXPECT_TRUE(bad.is_error);
  EXPECT_EQ(bad.content, "read_file: the arguments are not valid JSON");
  ToolResult empty = read_.ExecuteJson("", context_);
  EXPECT_THAT(empty.content, HasSubstr("missing required argument 'path'"));
}

TEST_F(FileToolsTest, HugeContentIsRefused) {
  context_.limits.max_write_bytes = 1024;
  ToolResult r = write_.Execute(
      {{"path", "big"}, {"content", std::string(2048, 'x')}}, context_);
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.content,
            "write_file: refused: the content is 2 KiB (2048 bytes), over the "
            "limit of 1 KiB (1024 bytes)");
  EXPECT_FALSE(std::filesystem::exists(InRoot("big")));
}

TEST_F(FileToolsTest, LargeFileIsCutWithANote) {
  ScratchTree::Write(InRoot("big.txt"), std::string(200 * 1024, 'x'));
  ToolResult r = read_.Execute({{"path", "big.txt"}}, context_);
  EXPECT_FALSE(r.is_error);
  EXPECT_THAT(r.content, StartsWith(std::string(64 * 1024, 'x') + "\n["));
  EXPECT_THAT(r.content,
              EndsWith("[read_file: cut: showing the first 64 KiB (65536 "
                       "bytes) of 'big.txt', which has 200 KiB (204800 "
                       "bytes)]"));
}

TEST_F(FileToolsTest, FileExactlyAtTheLimitIsWhole) {
  context_.limits.max_read_bytes = 10;
  ScratchTree::Write(InRoot("ten"), "0123456789");
  EXPECT_EQ(read_.Execute({{"path", "ten"}}, context_).content, "0123456789");
  ScratchTree::Write(InRoot("eleven"), "0123456789A");
  EXPECT_THAT(read_.Execute({{"path", "eleven"}}, context_).content,
              StartsWith("0123456789\n[read_file: cut"));
}

TEST_F(FileToolsTest, CutNeverSplitsACharacterAndOutputIsUtf8) {
  context_.limits.max_read_bytes = 5;
  ScratchTree::Write(InRoot("euro"), "\xE2\x82\xAC\xE2\x82\xAC");  // 6 bytes.
  ToolResult r = read_.Execute({{"path", "euro"}}, context_);
  EXPECT_THAT(r.content, StartsWith("\xE2\x82\xAC\n[read_file: cut"));
  ScratchTree::Write(InRoot("latin1"), "caf\xE9");
  ToolResult latin = read_.Execute({{"path", "latin1"}}, context_);
  EXPECT_EQ(latin.content, "caf\xEF\xBF\xBD");
  EXPECT_NO_THROW(nlohmann::json(latin.content).dump());
}

TEST_F(FileToolsTest, BinaryAndEmptyFiles) {
  ScratchTree::Write(InRoot("bin"), std::string("\x7F"
                                                "ELF\0\0\0",
                                                7));
  ToolResult bin = read_.Execute({{"path", "bin"}}, context_);
  EXPECT_TRUE(bin.is_error);
  EXPECT_EQ(bin.content,
            "read_file: 'bin' looks like a binary file (7 bytes); read_file "
            "returns text only");
  ScratchTree::Write(InRoot("empty"), "");
  EXPECT_EQ(read_.Execute({{"path", "empty"}}, context_).content,
            "(empty file)");
}

TEST_F(FileToolsTest, ListFilesShowsKindsSorted) {
  ScratchTree::Write(InRoot("b.txt"), "b");
  ScratchTree::Write(InRoot("sub/inner.txt"), "i");
  ScratchTree::Symlink("b.txt", InRoot("a_link"));
  ToolResult r = list_.Execute({{"path", "."}}, context_);
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.content, "a_link -> b.txt\nb.txt\nsub/\n");
  EXPECT_EQ(list_.Execute(nlohmann::json::object(), context_).content,
            r.content);
  EXPECT_EQ(list_.Execute({{"path", ""}}, context_).content, r.content);
  EXPECT_EQ(list_.Execute({{"path", "sub"}}, context_).content, "inner.txt\n");
  std::filesystem::create_directory(InRoot("void"));
  EXPECT_EQ(list_.Execute({{"path", "void"}}, context_).content,
            "(empty directory)");
  ToolResult file = list_.Execute({{"path", "b.txt"}}, context_);
  EXPECT_TRUE(file.is_error);
  EXPECT_THAT(file.content, HasSubstr("'b.txt' is not a directory"));
}

TEST_F(FileToolsTest, ListFilesIsBounded) {
  for (int i = 0; i < 30; ++i) {
    ScratchTree::Write(InRoot("many/f" + std::to_string(100 + i)), "");
  }
  context_.limits.max_list_entries = 10;
  ToolResult r = list_.Execute({{"path", "many"}}, context_);
  EXPECT_FALSE(r.is_error);
  EXPECT_THAT(r.content, StartsWith("f100\nf101\n"));
  EXPECT_THAT(r.content,
              EndsWith("f109\n[list_files: cut: showing 10 of 30 entries]\n"));
  // The output bound applies too.
  context_.limits.max_list_entries = 1000;
  context_.limits.max_output_bytes = 12;
  EXPECT_EQ(list_.Execute({{"path", "many"}}, context_).content,
            "f100\nf101\n[list_files: cut: showing 2 of 30 entries]\n");
}

TEST_F(FileToolsTest, MissingWorkingDirectoryIsAnError) {
  ToolContext gone("/nonexistent/steps/root", RealClock(), launcher_);
  ToolResult r = read_.Execute({{"path", "a"}}, gone);
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.content, HasSubstr("/nonexistent/steps/root"));
}

}  // namespace
}  // namespace steps
