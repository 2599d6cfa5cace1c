#include "tools/sandbox.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/random.h"

namespace steps {
namespace {

constexpr size_t kMaxPathBytes = 4096;
constexpr int kMaxSymlinks = 40;

Status Refused(const std::string& why) {
  return InvalidArgument("refused: " + why);
}

std::string Quoted(std::string_view path) {
  return "'" + std::string(path) + "'";
}

std::deque<std::string> SplitPath(std::string_view path) {
  std::deque<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) parts.emplace_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

Status CheckPathText(std::string_view path) {
  if (path.find('\0') != std::string_view::npos) {
    return Refused("the path contains a NUL byte");
  }
  if (path.size() > kMaxPathBytes) {
    return Refused("the path is longer than " + std::to_string(kMaxPathBytes) +
                   " bytes");
  }
  if (!path.empty() && path[0] == '/') {
    return Refused(Quoted(path) +
                   " is an absolute path; use a path relative to the working "
                   "directory");
  }
  return Status::Ok();
}

// A path that must name a file, not a directory.
Status CheckFilePath(std::string_view path) {
  if (Status s = CheckPathText(path); !s.ok()) return s;
  if (path.empty()) return InvalidArgument("the path is empty");
  if (path.back() == '/') {
    return InvalidArgument(Quoted(path) +
                           " ends with '/', so it names a directory, not a "
                           "file");
  }
  return Status::Ok();
}

// A regular file with more than one hard link may be the same file as one
// outside the root (a task can plant `ln /outside/file workspace/x`): no
// path check can tell, so the tools open only files with a single link.
Status CheckSingleLink(const struct stat& st, std::string_view path) {
  if (st.st_nlink <= 1) return Status::Ok();
  return Refused(Quoted(path) + " has " + std::to_string(st.st_nlink) +
                 " hard links, so it may be a file outside the working "
                 "directory; the file tools open only files with one link "
                 "(copy it to a new file with run_shell if you need it)");
}

// Whether `opened` (fstat of a descriptor) is the file `checked` (lstat at
// resolution) was: a name swapped since then, for instance for a hard link
// to an outside file whose inside name was removed again, is not.
bool SameFile(const struct stat& checked, const struct stat& opened) {
  return checked.st_dev == opened.st_dev && checked.st_ino == opened.st_ino;
}

// A new file beside `leaf` in `dir`, named so no tool or listing mistakes
// it for the user's (".LEAF.steps-RANDOM"), created with O_EXCL.
struct TempFile {
  UniqueFd fd;
  std::string name;
};

Result<TempFile> CreateTempBeside(int dir, const std::string& leaf,
                                  const std::string& shown) {
  for (int tries = 0; tries < 16; ++tries) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%016llx",
                  static_cast<unsigned long long>(RandomU64()));
    // Within NAME_MAX whatever the leaf's length.
    std::string name = "." + leaf.substr(0, 200) + ".steps-" + suffix;
    int fd = openat(dir, name.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) return TempFile{UniqueFd(fd), name};
    if (errno != EEXIST) return ErrnoStatus(shown, errno);
  }
  return ErrnoStatus(shown, EEXIST);
}

Status WriteAll(int fd, std::string_view data, const std::string& shown) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(shown, errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// The target of the symlink `name` in `dir`, or nullopt with errno set;
// "" when it does not fit in PATH_MAX bytes. Its buffer is on the heap:
// callers run on every conversation's thread, whose stacks stay small.
std::optional<std::string> ReadLinkAt(int dir, const char* name) {
  std::string buf(PATH_MAX + 1, '\0');
  ssize_t n = readlinkat(dir, name, buf.data(), buf.size());
  if (n < 0) return std::nullopt;
  if (static_cast<size_t>(n) >= buf.size()) return std::string();
  buf.resize(static_cast<size_t>(n));
  return buf;
}

// The canonical path of the directory open at `fd`, as the kernel names it
// (two system calls, where realpath walks every component); empty when
// /proc is not there or the directory is gone.
std::string PathOfFd(int fd) {
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  std::optional<std::string> target = ReadLinkAt(AT_FDCWD, link.c_str());
  if (!target || target->empty() || (*target)[0] != '/') return "";
  std::string path = std::move(*target);
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.size() >= kDeleted.size() &&
      path.compare(path.size() - kDeleted.size(), kDeleted.size(), kDeleted) ==
          0) {
    return "";
  }
  return path;
}

}  // namespace

Result<Sandbox> Sandbox::Open(const std::string& root) {
  int fd = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("working directory " + root, errno);
  return Sandbox(UniqueFd(fd), root);
}

std::string Sandbox::root() const {
  std::string path = PathOfFd(root_fd_.get());
  if (!path.empty()) return path;
  char* canonical = realpath(opened_as_.c_str(), nullptr);
  if (canonical == nullptr) return "";
  path = canonical;
  free(canonical);
  return path;
}

namespace {

// Why a path that leads out of the working directory is refused.
Status Escape(const std::string& shown, const std::string& via) {
  std::string why = shown + " leads outside the working directory";
  if (!via.empty()) why += " (through the symlink " + Quoted(via) + ")";
  return Refused(why);
}

// One walk of Sandbox::Resolve: the names left, the directories entered
// below the root (the root itself is the sandbox's descriptor), and the
// symlinks followed.
struct Walk {
  std::deque<std::string> pending;
  std::vector<UniqueFd> opened;
  int symlinks = 0;
  std::string via;  // The last symlink followed, for messages.
  // The root's path, looked up at the first absolute symlink target.
  std::optional<std::string> root_path;
};

// Follows the symlink `name` in `dir`: its target's names go first in the
// walk. An absolute target must lie inside `sandbox`'s root, and the walk
// goes on from the root; anything else is refused.
Status FollowSymlink(int dir, const std::string& name, const std::string& shown,
                     const Sandbox& sandbox, Walk& w) {
  if (++w.symlinks > kMaxSymlinks) {
    return Refused(shown + " goes through too many symlinks");
  }
  std::optional<std::string> read = ReadLinkAt(dir, name.c_str());
  if (!read) return ErrnoStatus(shown, errno);
  if (read->empty()) return Refused(shown + " goes through an unusable symlink");
  std::string target = std::move(*read);
  w.via = name;
  if (target[0] == '/') {
    if (!w.root_path) w.root_path = sandbox.root();
    const std::string& at = *w.root_path;
    // A root whose path cannot be told holds no absolute target.
    bool inside = !at.empty() && (at == "/" || target == at ||
                                  target.compare(0, at.size() + 1, at + "/") == 0);
    if (!inside) return Escape(shown, w.via);
    w.opened.clear();
    target.erase(0, at == "/" ? 0 : at.size());
  }
  std::deque<std::string> parts = SplitPath(target);
  w.pending.insert(w.pending.begin(), parts.begin(), parts.end());
  return Status::Ok();
}

// Opens the directory `name` in `dir` to walk on from. O_NOFOLLOW: if it
// was swapped for a symlink since it was looked at, this fails instead of
// following it.
Result<UniqueFd> EnterDir(int dir, const std::string& name,
                          const std::string& shown) {
  int fd = openat(dir, name.c_str(),
                  O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return UniqueFd(fd);
  int err = errno;
  if (err == ENOTDIR || err == ELOOP) {
    return InvalidArgument(shown + ": " + Quoted(name) + " is not a directory");
  }
  return ErrnoStatus(shown, err);
}

}  // namespace

Result<Sandbox::Location> Sandbox::Resolve(std::string_view path,
                                           Mode mode) const {
  if (Status s = CheckPathText(path); !s.ok()) return s;
  const std::string shown = Quoted(path);
  Walk w;
  w.pending = SplitPath(path);
  auto current = [&] {
    return w.opened.empty() ? root_fd_.get() : w.opened.back().get();
  };
  // Where the walk ends: in the directory reached, which the Location
  // takes over (the root's descriptor is lent, not copied).
  auto at = [&](std::string leaf, bool exists, const struct stat& st) {
    Location loc;
    if (w.opened.empty()) {
      loc.dir = root_fd_.get();
    } else {
      loc.owned = std::move(w.opened.back());
      loc.dir = loc.owned.get();
    }
    loc.leaf = std::move(leaf);
    loc.exists = exists;
    loc.st = st;
    return loc;
  };
  while (!w.pending.empty()) {
    std::string name = std::move(w.pending.front());
    w.pending.pop_front();
    if (name == ".") continue;
    if (name == "..") {
      if (w.opened.empty()) return Escape(shown, w.via);
      w.opened.pop_back();
      continue;
    }
    bool last = w.pending.empty();
    struct stat st;
    if (fstatat(current(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      int err = errno;
      if (err != ENOENT) return ErrnoStatus(shown, err);
      if (mode != Mode::kCreate) return NotFound(shown + " does not exist");
      if (last) return at(std::move(name), false, {});
      if (mkdirat(current(), name.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoStatus(
            "creating directory " + Quoted(name) + " for " + shown, errno);
      }
    } else if (S_ISLNK(st.st_mode)) {
      if (Status s = FollowSymlink(current(), name, shown, *this, w);
          !s.ok())
        return s;
      continue;
    } else if (last) {
      return at(std::move(name), true, st);
    }
    Result<UniqueFd> entered = EnterDir(current(), name, shown);
    if (!entered.ok()) return entered.status();
    w.opened.push_back(std::move(*entered));
  }
  // The path named a directory itself ("", ".", "a/..", "a/").
  return at("", true, {});
}

Result<UniqueFd> Sandbox::OpenFileForRead(std::string_view path,
                                          struct stat* opened) const {
  if (Status s = CheckFilePath(path); !s.ok()) return s;
  Result<Location> loc = Resolve(path, Mode::kExisting);
  if (!loc.ok()) return loc.status();
  std::string shown = Quoted(path);
  if (loc->leaf.empty() || S_ISDIR(loc->st.st_mode)) {
    return InvalidArgument(shown + " is a directory");
  }
  if (!S_ISREG(loc->st.st_mode)) {
    return InvalidArgument(shown + " is not a regular file");
  }
  if (Status s = CheckSingleLink(loc->st, path); !s.ok()) return s;
  int fd = openat(loc->dir, loc->leaf.c_str(),
                  O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) return Refused(shown + " changed while being opened");
    return ErrnoStatus(shown, errno);
  }
  UniqueFd file(fd);
  struct stat st;
  if (fstat(file.get(), &st) != 0) return ErrnoStatus(shown, errno);
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(shown + " is not a regular file");
  }
  // Again on what was opened: a link made since the check counts too.
  if (Status s = CheckSingleLink(st, path); !s.ok()) return s;
  if (!SameFile(loc->st, st)) {
    return Refused(shown + " changed while being opened");
  }
  if (opened != nullptr) *opened = st;
  return file;
}

Status Sandbox::CheckStillSingle(std::string_view path, int fd) const {
  const std::string shown = Quoted(path);
  struct stat opened;
  if (fstat(fd, &opened) != 0) return ErrnoStatus(shown, errno);
  if (Status s = CheckSingleLink(opened, path); !s.ok()) return s;
  Result<Location> loc = Resolve(path, Mode::kExisting);
  if (!loc.ok() || !loc->exists || !SameFile(loc->st, opened))
    return Refused(shown + " changed while being read");
  return CheckSingleLink(loc->st, path);
}

Status Sandbox::WriteFile(std::string_view path,
                          std::string_view content) const {
  if (Status s = CheckFilePath(path); !s.ok()) return s;
  Result<Location> loc = Resolve(path, Mode::kCreate);
  if (!loc.ok()) return loc.status();
  std::string shown = Quoted(path);
  if (loc->leaf.empty() || (loc->exists && S_ISDIR(loc->st.st_mode))) {
    return InvalidArgument(shown + " is a directory");
  }
  if (loc->exists && !S_ISREG(loc->st.st_mode)) {
    return InvalidArgument(shown + " is not a regular file");
  }
  if (loc->exists) {
    if (Status s = CheckSingleLink(loc->st, path); !s.ok()) return s;
  }
  // The content goes into a new file made here (O_EXCL) beside the name,
  // which is then renamed over the name. The file the name pointed at is
  // never opened for writing, so a hard link to a file outside planted
  // after the check above (st_nlink can read 1 while another process is
  // unlinking a second name) loses nothing: the rename replaces the name
  // only.
  const int dir = loc->dir;
  Result<TempFile> tmp = CreateTempBeside(dir, loc->leaf, shown);
  if (!tmp.ok()) return tmp.status();
  auto discard = [&](Status s) {
    unlinkat(dir, tmp->name.c_str(), 0);
    return s;
  };
  if (Status s = WriteAll(tmp->fd.get(), content, shown); !s.ok())
    return discard(s);
  const mode_t mode = loc->exists ? (loc->st.st_mode & 0777) : 0644;
  if (fchmod(tmp->fd.get(), mode) != 0)
    return discard(ErrnoStatus(shown, errno));
  if (renameat(dir, tmp->name.c_str(), dir, loc->leaf.c_str()) != 0) {
    int err = errno;
    if (err == EISDIR || err == ENOTEMPTY || err == EEXIST)
      return discard(InvalidArgument(shown + " is a directory"));
    return discard(ErrnoStatus(shown, err));
  }
  return Status::Ok();
}

Result<UniqueFd> Sandbox::OpenDirectory(std::string_view path) const {
  Result<Location> loc = Resolve(path, Mode::kExisting);
  if (!loc.ok()) return loc.status();
  std::string shown = Quoted(path.empty() ? "." : path);
  if (!loc->leaf.empty() && !S_ISDIR(loc->st.st_mode)) {
    return InvalidArgument(shown + " is not a directory");
  }
  const char* name = loc->leaf.empty() ? "." : loc->leaf.c_str();
  int fd = openat(loc->dir, name,
                  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) {
      return InvalidArgument(shown + " is not a directory");
    }
    return ErrnoStatus(shown, errno);
  }
  return UniqueFd(fd);
}

}  // namespace steps
