// Fuzz target: the agent tools' path resolver. Every path a model may name
// is resolved inside a root that holds symlinks pointing in, out, to
// themselves and nowhere; whatever the resolver opens must lie inside the
// root (checked through /proc/self/fd, or by walking up `..` where that
// path is too long to show), and nothing outside may change.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>

#include "tools/sandbox.h"

namespace {

namespace fs = std::filesystem;

// scratch/outside holds what must never be reached; the root sits three
// levels down so that a `..` too many still lands in the scratch folder.
struct Fixture {
  fs::path scratch;
  fs::path root;
  std::set<fs::path> initial;  // Every path under scratch, as set up.

  Fixture() = default;
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;
  ~Fixture() {
    std::error_code ec;
    if (!scratch.empty()) fs::remove_all(scratch, ec);
  }
};

std::set<fs::path> ListTree(const fs::path& dir) {
  std::set<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    out.insert(it->path());
  }
  return out;
}

void MakeFixture(Fixture& f) {
  std::string tmpl =
      (fs::temp_directory_path() / "steps-fuzz-sandbox-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) abort();
  f.scratch = tmpl;
  fs::create_directories(f.scratch / "outside");
  std::ofstream(f.scratch / "outside" / "secret") << "s";
  f.root = f.scratch / "a" / "b" / "root";
  fs::create_directories(f.root / "sub" / "deeper");
  std::ofstream(f.root / "file.txt") << "f";
  std::ofstream(f.root / "sub" / "inner.txt") << "i";
  fs::create_symlink("sub", f.root / "link_in");
  fs::create_symlink(f.root / "sub", f.root / "link_abs_in");
  fs::create_symlink("../../../outside", f.root / "link_out");
  fs::create_symlink(f.scratch / "outside" / "secret", f.root / "link_abs_out");
  fs::create_symlink("../file.txt", f.root / "sub" / "link_up_in");
  fs::create_symlink("../../..", f.root / "sub" / "link_up_out");
  fs::create_symlink("loop", f.root / "loop");
  fs::create_symlink("new.txt", f.root / "dangling_in");
  fs::create_symlink("../../../outside/new", f.root / "dangling_out");
  f.initial = ListTree(f.scratch);
}

// Made once per process; removed with everything in it at exit.
const Fixture& GetFixture() {
  static Fixture f;
  if (f.scratch.empty()) MakeFixture(f);
  return f;
}

bool SameInode(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// For a descriptor whose absolute path is longer than the kernel will show
// (an input may create directories until it is): a directory must reach the
// root going up through `..`; a file must not be one of the fixture's files
// outside the root (those have short paths, and RestoreAndCheck fails any
// new file outside the root).
void CheckLongPathInside(int fd, const Fixture& f) {
  struct stat st, root;
  if (fstat(fd, &st) != 0 || stat(f.root.c_str(), &root) != 0) abort();
  if (!S_ISDIR(st.st_mode)) {
    for (const fs::path& p : f.initial) {
      struct stat outside;
      if (p.string().rfind(f.root.string() + "/", 0) == 0) continue;
      if (lstat(p.c_str(), &outside) == 0 && SameInode(st, outside)) abort();
    }
    return;
  }
  int dir = dup(fd);
  for (int depth = 0; dir >= 0 && depth < PATH_MAX; ++depth) {
    struct stat here;
    if (fstat(dir, &here) != 0) break;
    if (SameInode(here, root)) {
      close(dir);
      return;
    }
    int up = openat(dir, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    close(dir);
    dir = up;
  }
  abort();  // Reached "/" (or failed) without passing the root.
}

// What descriptor `fd` really opened must be the root or below it.
void CheckInsideRoot(int fd, const Fixture& f) {
  char buf[PATH_MAX];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n < 0 && errno == ENAMETOOLONG) return CheckLongPathInside(fd, f);
  if (n < 0) abort();
  std::string opened(buf, static_cast<size_t>(n));
  std::string root = fs::canonical(f.root).string();
  if (opened != root && opened.rfind(root + "/", 0) != 0) abort();
}

// Removes what the input created, and fails on any change outside the root.
void RestoreAndCheck(const Fixture& f) {
  for (const fs::path& p : ListTree(f.scratch)) {
    if (f.initial.count(p)) continue;
    std::string s = p.string();
    std::string root = f.root.string() + "/";
    if (s.rfind(root, 0) != 0) abort();  // Created outside the root.
    std::error_code ec;
    fs::remove_all(p, ec);
  }
  std::ifstream secret(f.scratch / "outside" / "secret");
  std::string content;
  std::getline(secret, content);
  if (content != "s") abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixture& f = GetFixture();
  static auto sandbox = steps::Sandbox::Open(f.root.string());
  if (!sandbox.ok()) abort();
  std::string_view path(reinterpret_cast<const char*>(data), size);
  if (auto fd = sandbox->OpenFileForRead(path); fd.ok()) {
    CheckInsideRoot(fd->get(), f);
  }
  if (auto fd = sandbox->OpenDirectory(path); fd.ok()) {
    CheckInsideRoot(fd->get(), f);
  }
  if (sandbox->WriteFile(path, "fuzz").ok()) {
    if (auto fd = sandbox->OpenFileForRead(path); fd.ok()) {
      CheckInsideRoot(fd->get(), f);
    }
  }
  RestoreAndCheck(f);
  return 0;
}
