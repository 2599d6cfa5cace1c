// The job's workspace as files: listing, hashing and copying folder trees
// for the step cache and for a step's inputs and outputs.
//
// Contract shared by every function here:
// - Only directories, regular files and symlinks are touched. FIFOs,
//   sockets and devices are never opened (opening a FIFO blocks until a
//   writer comes, which may be never); they are left out with the warning
//   `WRN workspace.skipped path=P type=fifo|socket|device`.
// - Symlinks are never followed: a link is listed, hashed and copied as its
//   target text.
// - The work stops at the step's deadline and on abort (WorkLimit), checked
//   between files and between chunks of a large file.
#ifndef STEPS_PIPELINE_WORKSPACE_H_
#define STEPS_PIPELINE_WORKSPACE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/cancel.h"
#include "core/clock.h"
#include "core/status.h"

namespace steps::pipeline {

// When workspace work must stop. Default: never.
struct WorkLimit {
  // The clock `deadline` is measured on; null means no deadline applies.
  const Clock* clock = nullptr;
  // Cancelled on abort (SIGINT/SIGTERM) or by an enclosing scope.
  CancelToken token;
  Deadline deadline;

  // kCancelled once the token is cancelled, kDeadlineExceeded once the
  // deadline has passed, else OK.
  Status Check() const;
};

// One entry of a tree as lstat(2) saw it.
struct TreeEntry {
  // kOther: a FIFO, socket or device, never opened, copied or read; it is
  // listed so that adding, removing or replacing one changes the digests.
  enum class Type { kDirectory, kFile, kSymlink, kOther };
  std::string rel;  // Path relative to the tree's root, '/'-separated.
  Type type = Type::kFile;
  uint32_t mode = 0;  // Permission bits (st_mode & 07777).
  uint64_t size = 0;
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  std::string link_target;  // kSymlink only.
  const char* other = "";   // kOther only: "fifo", "socket", "device"...
};

// Every entry under `root` (not `root` itself), sorted by `rel`, without
// opening any file. A missing root is an empty tree. With `warn`, entries
// of kOther (never copied or read) are logged.
Result<std::vector<TreeEntry>> ListTree(const std::string& root,
                                        const WorkLimit& limit, bool warn);

// A digest of the listing alone (names, types, permission bits, sizes,
// inodes, times, link targets): it changes whenever anything in the tree
// is added, removed, replaced, written or made executable, and costs no
// file reads.
std::string SnapshotDigest(const std::vector<TreeEntry>& entries);

// SHA-256 digests of regular files' bytes, remembered by (device, inode,
// size, mtime, ctime) so that an unchanged file is read once. Thread-safe.
class ContentDigests {
 public:
  // REQUIRES: `entry` is a kFile entry listed under `root`. Reads the file
  // in chunks, checking `limit` between them; the file must still be a
  // regular file when opened (never a FIFO swapped in since the listing).
  Result<std::string> FileDigest(const std::string& root,
                                 const TreeEntry& entry,
                                 const WorkLimit& limit);

 private:
  using Key = std::tuple<uint64_t, uint64_t, uint64_t, int64_t, int64_t>;
  std::mutex mu_;
  std::map<Key, std::string> digests_;
};

// The digest of a tree for the step cache key: every entry's path, type
// and permission bits, each a field of its own (no name can pass for two);
// the bytes of regular files for which `read_contents(entry)` is true and
// the identity of the others (size, inode, times: any write changes it, so
// leaving a file unread costs at most a cache miss, never a wrong hit); a
// symlink's target text; the kind of a FIFO, socket or device.
Result<std::string> TreeDigest(
    const std::string& root, const std::vector<TreeEntry>& entries,
    const std::function<bool(const TreeEntry& entry)>& read_contents,
    ContentDigests& digests, const WorkLimit& limit);

// Replaces `to` with a copy of the tree at `from` (a folder, or a single
// file): directories, regular files (their holes kept, so a sparse file
// stays sparse) and symlinks as links. Skipped entries are logged.
Status CopyTree(const std::string& from, const std::string& to,
                const WorkLimit& limit);

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_WORKSPACE_H_
