// The workspace's file work (workspace.h) on real folders: what it skips,
// what it keeps, and where it stops.
#include "pipeline/workspace.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/temp_dir.h"
#include "core/hash.h"

namespace steps::pipeline {
namespace {

namespace fs = std::filesystem;
using test_support::TempDir;

std::vector<std::string> Names(const std::vector<TreeEntry>& entries) {
  std::vector<std::string> out;
  for (const TreeEntry& e : entries) out.push_back(e.rel);
  return out;
}

TEST(WorkspaceTest, ListingSkipsFifosAndNeverFollowsLinks) {
  TempDir dir;
  fs::create_directories(dir / "sub");
  dir.Write("sub/a.txt", "a");
  ASSERT_EQ(::mkfifo((dir / "sub/pipe").c_str(), 0600), 0);
  fs::create_symlink("/etc", dir / "link");
  Result<std::vector<TreeEntry>> entries =
      ListTree(dir.path(), WorkLimit(), false);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_EQ(Names(*entries),
            (std::vector<std::string>{"link", "sub", "sub/a.txt", "sub/pipe"}));
  EXPECT_EQ((*entries)[0].type, TreeEntry::Type::kSymlink);
  EXPECT_EQ((*entries)[0].link_target, "/etc");
  // The FIFO is listed (so that adding one changes the digests), never
  // opened.
  EXPECT_EQ((*entries)[3].type, TreeEntry::Type::kOther);
  EXPECT_STREQ((*entries)[3].other, "fifo");
}

TEST(WorkspaceTest, MissingRootIsAnEmptyTree) {
  TempDir dir;
  Result<std::vector<TreeEntry>> entries =
      ListTree(dir / "absent", WorkLimit(), false);
  ASSERT_TRUE(entries.ok());
  EXPECT_TRUE(entries->empty());
}

// As the root: a symlink (to a folder, even) or a file is no tree.
TEST(WorkspaceTest, ARootThatIsNoFolderIsAnEmptyTree) {
  TempDir dir;
  fs::create_directories(dir / "real");
  dir.Write("real/a.txt", "a");
  fs::create_directory_symlink(dir / "real", dir / "link");
  dir.Write("file", "x");
  for (const char* root : {"link", "file"}) {
    Result<std::vector<TreeEntry>> entries =
        ListTree(dir / root, WorkLimit(), false);
    ASSERT_TRUE(entries.ok()) << root << ": " << entries.status().ToString();
    EXPECT_TRUE(entries->empty()) << root;
  }
}

// Folders that take the file system several reads to list, nested, are
// listed whole and sorted.
TEST(WorkspaceTest, LargeAndDeepFoldersAreListedWhole) {
  TempDir dir;
  std::vector<std::string> want;
  std::string deep;
  for (int level = 0; level < 12; ++level) {
    deep += (deep.empty() ? "" : "/") + std::string("d") + std::to_string(level);
    want.push_back(deep);
  }
  fs::create_directories(dir / deep);
  dir.Write(deep + "/leaf", "x");
  want.push_back(deep + "/leaf");
  fs::create_directories(dir / "many");
  want.push_back("many");
  const std::string pad(120, 'n');
  for (int i = 0; i < 700; ++i) {
    const std::string name = "many/" + pad + std::to_string(1000 + i);
    dir.Write(name, "");
    want.push_back(name);
  }
  std::sort(want.begin(), want.end());
  Result<std::vector<TreeEntry>> entries =
      ListTree(dir.path(), WorkLimit(), false);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_EQ(Names(*entries), want);
}

// A tree deeper than a path can name is refused with ENAMETOOLONG (as
// listing by path refused it), not followed until the stack runs out.
TEST(WorkspaceTest, ATreeDeeperThanAPathCanNameIsRefused) {
  TempDir dir;
  const std::string name(200, 'd');  // 21 levels make more than PATH_MAX.
  std::vector<int> fds{::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY)};
  for (int level = 0; level < 25; ++level) {
    ASSERT_EQ(::mkdirat(fds.back(), name.c_str(), 0700), 0) << level;
    fds.push_back(::openat(fds.back(), name.c_str(), O_RDONLY | O_DIRECTORY));
    ASSERT_GE(fds.back(), 0) << level;
  }
  Result<std::vector<TreeEntry>> entries =
      ListTree(dir.path(), WorkLimit(), false);
  EXPECT_FALSE(entries.ok());
  EXPECT_NE(entries.status().message().find(std::strerror(ENAMETOOLONG)),
            std::string::npos)
      << entries.status().ToString();
  // Removed from the bottom up, through the descriptors: by path it is
  // too long to name.
  ::close(fds.back());
  fds.pop_back();
  while (!fds.empty()) {
    ASSERT_EQ(::unlinkat(fds.back(), name.c_str(), AT_REMOVEDIR), 0);
    ::close(fds.back());
    fds.pop_back();
  }
}

TEST(WorkspaceTest, CopySkipsFifosKeepsLinksAndHoles) {
  TempDir dir;
  fs::create_directories(dir / "from/deep");
  dir.Write("from/deep/f", "bytes");
  ASSERT_EQ(::mkfifo((dir / "from/pipe").c_str(), 0600), 0);
  fs::create_symlink("deep/f", dir / "from/link");
  {
    int fd = ::open((dir / "from/sparse").c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "end", 3, (1 << 30) - 3), 3);
    ::close(fd);
  }
  ASSERT_TRUE(CopyTree(dir / "from", dir / "to", WorkLimit()).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir / "to/pipe")));
  EXPECT_EQ(fs::read_symlink(dir / "to/link"), "deep/f");
  EXPECT_EQ(fs::file_size(dir / "to/deep/f"), 5u);
  EXPECT_EQ(fs::file_size(dir / "to/sparse"), 1u << 30);
  struct stat st;
  ASSERT_EQ(::stat((dir / "to/sparse").c_str(), &st), 0);
  EXPECT_LT(st.st_blocks * 512, 1 << 20) << "the copy stays sparse";
}

TEST(WorkspaceTest, WorkStopsWhenCancelledOrPastTheDeadline) {
  TempDir dir;
  dir.Write("f", "x");
  WorkLimit aborted;
  aborted.token.Cancel(CancelReason::kAbort);
  EXPECT_EQ(ListTree(dir.path(), aborted, false).status().code(),
            StatusCode::kCancelled);
  EXPECT_EQ(CopyTree(dir.path(), dir / "copy", aborted).code(),
            StatusCode::kCancelled);
  FakeClock clock;
  WorkLimit expired{&clock, CancelToken(), Deadline::At(clock.Now())};
  EXPECT_EQ(ListTree(dir.path(), expired, false).status().code(),
            StatusCode::kDeadlineExceeded);
}

// Within one large file the limit is checked between chunks, and a FIFO
// swapped in for a listed file is refused, never opened for a blocking read.
TEST(WorkspaceTest, FileDigestStopsInsideAFileAndNeverBlocksOnAFifo) {
  TempDir dir;
  {
    int fd = ::open((dir / "big").c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 64 << 20), 0);
    ::close(fd);
  }
  Result<std::vector<TreeEntry>> entries =
      ListTree(dir.path(), WorkLimit(), false);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  ContentDigests digests;
  WorkLimit aborted;
  aborted.token.Cancel(CancelReason::kAbort);
  EXPECT_EQ(
      digests.FileDigest(dir.path(), (*entries)[0], aborted).status().code(),
      StatusCode::kCancelled);
  ASSERT_EQ(::unlink((dir / "big").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir / "big").c_str(), 0600), 0);
  Result<std::string> fifo =
      digests.FileDigest(dir.path(), (*entries)[0], WorkLimit());
  EXPECT_FALSE(fifo.ok());
  EXPECT_NE(fifo.status().message().find("no longer a regular file"),
            std::string::npos)
      << fifo.status().ToString();
}

TEST(WorkspaceTest, DigestsReadAFileOnceAndSeeWrites) {
  TempDir dir;
  dir.Write("f", "one");
  ContentDigests digests;
  auto digest = [&] {
    Result<std::vector<TreeEntry>> e = ListTree(dir.path(), WorkLimit(), false);
    return *TreeDigest(
        dir.path(), *e, [](const TreeEntry&) { return true; }, digests,
        WorkLimit());
  };
  const std::string first = digest();
  EXPECT_EQ(digest(), first);
  dir.Write("f", "two");
  EXPECT_NE(digest(), first);
  // Left unread, a file is still told apart by its identity.
  Result<std::vector<TreeEntry>> e = ListTree(dir.path(), WorkLimit(), false);
  auto unread = [&] {
    return *TreeDigest(
        dir.path(), *e, [](const TreeEntry&) { return false; }, digests,
        WorkLimit());
  };
  EXPECT_EQ(unread(), unread());
  EXPECT_NE(unread(), first);
}

std::string DigestOf(const std::string& root) {
  ContentDigests digests;
  Result<std::vector<TreeEntry>> e = ListTree(root, WorkLimit(), false);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  Result<std::string> d = TreeDigest(
      root, *e, [](const TreeEntry&) { return true; }, digests, WorkLimit());
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? *d : "";
}

// What a step can tell apart changes the cache key: a file made
// executable (a script that lost +x fails when run), and a FIFO added.
TEST(WorkspaceTest, TheDigestSeesModesAndFifos) {
  TempDir dir;
  dir.Write("s.sh", "#!/bin/sh\necho hi\n");
  const std::string plain = DigestOf(dir.path());
  fs::permissions(dir / "s.sh", fs::perms::owner_exec, fs::perm_options::add);
  const std::string executable = DigestOf(dir.path());
  EXPECT_NE(executable, plain);
  fs::permissions(dir / "s.sh", fs::perms::owner_exec,
                  fs::perm_options::remove);
  EXPECT_EQ(DigestOf(dir.path()), plain);
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  EXPECT_NE(DigestOf(dir.path()), plain);
}

// A file's name cannot make one entry pass for two: "a" and "b" against
// one file whose name spells what "a" hashed into, followed by "b"'s name
// (which collided when paths were part of the fields' names).
TEST(WorkspaceTest, NoFileNamePassesForTwoEntries) {
  TempDir two;
  two.Write("a", "one\n");
  two.Write("b", "two\n");
  TempDir one;
  const std::string one_digest =
      "2c8b08da5ce60398e1f19af0e5dccc744df274b826abe585eaba68c525434806";
  ASSERT_EQ(Sha256Hex("one\n"), one_digest);
  one.Write("a=64:" + one_digest + ";file:b", "two\n");
  EXPECT_NE(DigestOf(two.path()), DigestOf(one.path()));
}

}  // namespace
}  // namespace steps::pipeline
