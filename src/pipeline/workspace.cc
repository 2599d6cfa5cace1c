#include "pipeline/workspace.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/hash.h"
#include "core/log.h"

namespace steps::pipeline {

namespace {

// Bytes read or written between two checks of the limit.
constexpr size_t kChunk = 1 << 20;

// A buffer for reading a file of `size` bytes in chunks of at most kChunk:
// no larger than the file needs (plus one byte, so the read that finds the
// end needs no second buffer), and not zeroed, since every byte used was
// read first. A workspace of many small files then costs no megabyte of
// fresh, zeroed memory per file.
struct ChunkBuffer {
  explicit ChunkBuffer(uint64_t size)
      : size(size >= kChunk ? kChunk : std::max<size_t>(size + 1, 4096)),
        data(std::make_unique_for_overwrite<char[]>(this->size)) {}
  size_t size;
  std::unique_ptr<char[]> data;
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string Join(const std::string& a, const std::string& b) {
  return b.empty() ? a : a + "/" + b;
}

int64_t Nanos(const timespec& t) {
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

// The name of a type that is never touched, or nullptr for one that is.
const char* SkippedType(mode_t mode) {
  if (S_ISFIFO(mode)) return "fifo";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "device";
  if (S_ISDIR(mode) || S_ISREG(mode) || S_ISLNK(mode)) return nullptr;
  return "unknown";
}

void WarnSkipped(const std::string& path, const char* type) {
  LogEvent(LogLevel::kWarn, "workspace.skipped",
           {{"path", path}, {"type", type}});
}

// The target of the symlink `name` in the folder open at `dir_fd`, which
// `path` names for messages.
Result<std::string> ReadLinkAt(int dir_fd, const char* name,
                               const std::string& path, size_t size) {
  std::string target(std::max<size_t>(size, 255) + 1, '\0');
  ssize_t n = ::readlinkat(dir_fd, name, target.data(), target.size());
  if (n < 0) return ErrnoStatus("readlink " + path, errno);
  target.resize(static_cast<size_t>(n));
  return target;
}

// The names in the folder open at `dir_fd` but "." and "..", in the order
// the file system gives them.
Status ReadNames(int dir_fd, const std::string& dir,
                 std::vector<std::string>& names) {
  // On the heap: this runs on fibers, whose stacks are kept small.
  constexpr size_t kBytes = 8192;
  auto buffer = std::make_unique_for_overwrite<char[]>(kBytes);
  while (true) {
    ssize_t n = ::getdents64(dir_fd, buffer.get(), kBytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("list " + dir, errno);
    if (n == 0) return Status::Ok();
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(buffer.get() + at);
      at += e->d_reclen;
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0)
        continue;
      names.emplace_back(e->d_name);
    }
  }
}

// Lists the folder open at `dir_fd` (root/rel) into `out`, depth first.
// Every look goes from a descriptor, never by path: a folder swapped for a
// symlink while it is listed is never followed out of the tree, and no
// path is looked up again from the root for each entry.
Status ListInto(int dir_fd, const std::string& root, const std::string& rel,
                const WorkLimit& limit, bool warn,
                std::vector<TreeEntry>& out) {
  std::vector<std::string> names;
  if (Status s = ReadNames(dir_fd, Join(root, rel), names); !s.ok()) return s;
  for (const std::string& name : names) {
    if (Status s = limit.Check(); !s.ok()) return s;
    TreeEntry entry;
    entry.rel = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // Removed while listing.
      return ErrnoStatus("stat " + Join(root, entry.rel), errno);
    }
    entry.mode = st.st_mode & 07777;
    entry.size = static_cast<uint64_t>(st.st_size);
    entry.device = st.st_dev;
    entry.inode = st.st_ino;
    entry.mtime_ns = Nanos(st.st_mtim);
    entry.ctime_ns = Nanos(st.st_ctim);
    if (const char* skipped = SkippedType(st.st_mode)) {
      // Listed, never opened.
      if (warn) WarnSkipped(Join(root, entry.rel), skipped);
      entry.type = TreeEntry::Type::kOther;
      entry.other = skipped;
    } else if (S_ISLNK(st.st_mode)) {
      entry.type = TreeEntry::Type::kSymlink;
      Result<std::string> target =
          ReadLinkAt(dir_fd, name.c_str(), Join(root, entry.rel), entry.size);
      if (!target.ok()) return target.status();
      entry.link_target = *target;
    } else if (S_ISDIR(st.st_mode)) {
      entry.type = TreeEntry::Type::kDirectory;
    }
    out.push_back(entry);
    if (entry.type != TreeEntry::Type::kDirectory) continue;
    // No deeper than a path can name (as listing by path was): a tree
    // thousands of folders deep is refused, not followed until the stack
    // or the memory for its ever longer paths runs out.
    if (root.size() + 1 + entry.rel.size() >= PATH_MAX) {
      return ErrnoStatus("list " + Join(root, entry.rel), ENAMETOOLONG);
    }
    Fd sub(::openat(dir_fd, name.c_str(),
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.get() < 0) {
      // Removed, or replaced by something that is not a folder, since it
      // was looked at: listed as it was, without what it held.
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;
      return ErrnoStatus("list " + Join(root, entry.rel), errno);
    }
    if (Status s = ListInto(sub.get(), root, entry.rel, limit, warn, out);
        !s.ok())
      return s;
  }
  return Status::Ok();
}

// Opens a regular file for reading, never blocking on (or following) what
// was swapped in since it was listed.
Result<int> OpenRegular(const std::string& path) {
  int fd = ::open(path.c_str(),
                  O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError(path + " is no longer a regular file");
  }
  return fd;
}

Status CopyFile(const std::string& from, const std::string& to,
                const WorkLimit& limit) {
  Result<int> in_fd = OpenRegular(from);
  if (!in_fd.ok()) return in_fd.status();
  Fd in(*in_fd);
  struct stat st;
  ::fstat(in.get(), &st);
  Fd out(::open(to.c_str(),
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                st.st_mode & 07777));
  if (out.get() < 0) return ErrnoStatus("create " + to, errno);
  const off_t size = st.st_size;
  ChunkBuffer buf(static_cast<uint64_t>(size));
  off_t pos = 0;
  while (pos < size) {
    // Skip holes: a sparse file costs what it holds, not its length.
    off_t data = ::lseek(in.get(), pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // Only a hole is left.
    off_t hole = data < 0 ? size : ::lseek(in.get(), data, SEEK_HOLE);
    if (data < 0) data = pos;  // No hole support: copy every byte.
    if (hole < 0) hole = size;
    for (pos = data; pos < hole;) {
      if (Status s = limit.Check(); !s.ok()) return s;
      size_t want = static_cast<size_t>(
          std::min<off_t>(hole - pos, static_cast<off_t>(buf.size)));
      ssize_t n = ::pread(in.get(), buf.data.get(), want, pos);
      if (n < 0) return ErrnoStatus("read " + from, errno);
      if (n == 0) break;
      for (ssize_t done = 0; done < n;) {
        ssize_t w = ::pwrite(out.get(), buf.data.get() + done,
                             static_cast<size_t>(n - done), pos + done);
        if (w < 0) return ErrnoStatus("write " + to, errno);
        done += w;
      }
      pos += n;
    }
    pos = std::max(pos, hole);
  }
  if (::ftruncate(out.get(), size) != 0)
    return ErrnoStatus("write " + to, errno);
  return Status::Ok();
}

Status CopyEntry(const std::string& from, const std::string& to,
                 const TreeEntry& e, const WorkLimit& limit) {
  switch (e.type) {
    case TreeEntry::Type::kDirectory:
      if (::mkdir(to.c_str(), 0755) != 0 && errno != EEXIST)
        return ErrnoStatus("create " + to, errno);
      return Status::Ok();
    case TreeEntry::Type::kSymlink:
      if (::symlink(e.link_target.c_str(), to.c_str()) != 0)
        return ErrnoStatus("create " + to, errno);
      return Status::Ok();
    case TreeEntry::Type::kFile:
      return CopyFile(from, to, limit);
    case TreeEntry::Type::kOther:
      return Status::Ok();  // Never copied (logged when listed).
  }
  return Status::Ok();
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return IoError("remove " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Status WorkLimit::Check() const {
  if (token.cancelled()) return Status(StatusCode::kCancelled, "aborted");
  if (clock && deadline.Expired(*clock))
    return Status(StatusCode::kDeadlineExceeded, "timed out");
  return Status::Ok();
}

Result<std::vector<TreeEntry>> ListTree(const std::string& root,
                                        const WorkLimit& limit, bool warn) {
  std::vector<TreeEntry> entries;
  Fd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) {
    // Missing, or not a folder (a symlink to one included): no tree.
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return entries;
    return ErrnoStatus("list " + root, errno);
  }
  if (Status s = ListInto(dir.get(), root, "", limit, warn, entries); !s.ok())
    return s;
  std::sort(
      entries.begin(), entries.end(),
      [](const TreeEntry& a, const TreeEntry& b) { return a.rel < b.rel; });
  return entries;
}

std::string SnapshotDigest(const std::vector<TreeEntry>& entries) {
  FieldHasher h;
  for (const TreeEntry& e : entries) {
    h.Add("path", e.rel);
    h.Add("meta", std::to_string(static_cast<int>(e.type)) + " " +
                      std::to_string(e.mode) + " " +
                      std::to_string(e.size) + " " + std::to_string(e.device) +
                      " " + std::to_string(e.inode) + " " +
                      std::to_string(e.mtime_ns) + " " +
                      std::to_string(e.ctime_ns));
    h.Add("target", e.link_target);
  }
  return h.HexDigest();
}

Result<std::string> ContentDigests::FileDigest(const std::string& root,
                                               const TreeEntry& entry,
                                               const WorkLimit& limit) {
  const Key key{entry.device, entry.inode, entry.size, entry.mtime_ns,
                entry.ctime_ns};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = digests_.find(key); it != digests_.end()) return it->second;
  }
  const std::string path = Join(root, entry.rel);
  Result<int> fd = OpenRegular(path);
  if (!fd.ok()) return fd.status();
  Fd in(*fd);
  Sha256 sha;
  ChunkBuffer buf(entry.size);
  for (;;) {
    if (Status s = limit.Check(); !s.ok()) return s;
    ssize_t n = ::read(in.get(), buf.data.get(), buf.size);
    if (n < 0) return ErrnoStatus("read " + path, errno);
    if (n == 0) break;
    sha.Update(std::string_view(buf.data.get(), static_cast<size_t>(n)));
  }
  std::string digest = sha.HexDigest();
  std::lock_guard<std::mutex> lock(mu_);
  digests_[key] = digest;
  return digest;
}

Result<std::string> TreeDigest(
    const std::string& root, const std::vector<TreeEntry>& entries,
    const std::function<bool(const TreeEntry& entry)>& read_contents,
    ContentDigests& digests, const WorkLimit& limit) {
  // Names are constants and every value is framed by its length: a path
  // never stands in the place of a name, so no entry can pass for two.
  FieldHasher h;
  for (const TreeEntry& e : entries) {
    h.Add("path", e.rel);
    h.Add("mode", std::to_string(e.mode));
    switch (e.type) {
      case TreeEntry::Type::kDirectory:
        h.Add("type", "dir");
        break;
      case TreeEntry::Type::kSymlink:
        h.Add("type", "link");
        h.Add("target", e.link_target);
        break;
      case TreeEntry::Type::kOther:
        h.Add("type", e.other);
        break;
      case TreeEntry::Type::kFile:
        h.Add("type", "file");
        if (read_contents(e)) {
          Result<std::string> d = digests.FileDigest(root, e, limit);
          if (!d.ok()) return d.status();
          h.Add("bytes", *d);
        } else {
          h.Add("identity",
                std::to_string(e.size) + " " + std::to_string(e.device) + " " +
                    std::to_string(e.inode) + " " + std::to_string(e.mtime_ns) +
                    " " + std::to_string(e.ctime_ns));
        }
        break;
    }
  }
  return h.HexDigest();
}

Status CopyTree(const std::string& from, const std::string& to,
                const WorkLimit& limit) {
  if (Status s = RemoveTree(to); !s.ok()) return s;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(to).parent_path(),
                                      ec);
  if (ec) return IoError("create " + to + ": " + ec.message());
  struct stat st;
  if (::lstat(from.c_str(), &st) != 0)
    return ErrnoStatus("copy " + from, errno);
  if (const char* skipped = SkippedType(st.st_mode)) {
    WarnSkipped(from, skipped);
    return Status::Ok();
  }
  TreeEntry top;
  top.type = S_ISDIR(st.st_mode)   ? TreeEntry::Type::kDirectory
             : S_ISLNK(st.st_mode) ? TreeEntry::Type::kSymlink
                                   : TreeEntry::Type::kFile;
  if (top.type == TreeEntry::Type::kSymlink) {
    Result<std::string> target = ReadLinkAt(
        AT_FDCWD, from.c_str(), from, static_cast<size_t>(st.st_size));
    if (!target.ok()) return target.status();
    top.link_target = *target;
  }
  if (Status s = CopyEntry(from, to, top, limit); !s.ok()) return s;
  if (top.type != TreeEntry::Type::kDirectory) return Status::Ok();
  Result<std::vector<TreeEntry>> entries = ListTree(from, limit, true);
  if (!entries.ok()) return entries.status();
  for (const TreeEntry& e : *entries) {
    if (Status s = limit.Check(); !s.ok()) return s;
    if (Status s = CopyEntry(Join(from, e.rel), Join(to, e.rel), e, limit);
        !s.ok())
      return s;
  }
  return Status::Ok();
}

}  // namespace steps::pipeline
