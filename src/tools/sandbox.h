// The agent tools' confinement: every path a model names is resolved inside
// one root directory (the step's working directory), and nothing outside it
// can be read, written or listed.
#ifndef STEPS_TOOLS_SANDBOX_H_
#define STEPS_TOOLS_SANDBOX_H_

#include <sys/stat.h>

#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"
#include "process/unique_fd.h"

namespace steps {

// Paths are relative to the root. Refused, with a message a model can act
// on (StatusCode::kInvalidArgument, text starting "refused:"):
//  - absolute paths, empty paths where a file is needed, NUL bytes, paths
//    over 4096 bytes;
//  - `..` that climbs above the root, directly or inside a symlink's target;
//  - symlinks (anywhere on the path, the last component included) whose
//    target lies outside the root; an absolute target is accepted only
//    when it points inside the root's canonical path.
//  - regular files with more than one hard link, for reading and for
//    writing: a hard link planted in the root may be the very file of one
//    outside it, and no path check can tell (checked before the open and
//    again on the opened descriptor; a write empties the file only after
//    both checks);
//  - FIFOs, sockets and devices ("is not a regular file"; never blocking).
// Symlinks that stay inside are followed (at most 40 per path).
//
// Resolution walks one component at a time from a descriptor of the root
// (openat with O_NOFOLLOW, each symlink read and checked by hand), and the
// final open is O_NOFOLLOW relative to the resolved parent. A path swapped
// for a symlink between the checks and the open makes the open fail; it
// never lets it through. Other errors: kNotFound (a component does not
// exist), kIoError (the OS said no; message names the path).
//
// Thread-safe: a Sandbox is immutable once opened.
class Sandbox {
 public:
  // REQUIRES: `root` names an existing directory (it may be relative to the
  // process's working directory).
  static Result<Sandbox> Open(const std::string& root);

  // The canonical absolute path of the root as it is now (where the
  // directory that was opened lies, even if it was moved since); "" when
  // neither /proc nor realpath can tell. Asked for only when needed (a
  // symlink to an absolute path, a command's working directory): a file
  // tool call that meets none costs no lookup of it.
  std::string root() const;

  // An existing regular file, open for reading. `st`, when given, gets
  // the opened file's status (as fstat tells it).
  Result<UniqueFd> OpenFileForRead(std::string_view path,
                                   struct stat* st = nullptr) const;
  // After reading `fd` (from OpenFileForRead(path)): refused unless `path`
  // still names that file and it has one link. A second name being
  // unlinked at the moment of the first check can make a planted hard link
  // read as single (st_nlink drops before the name goes); checking again
  // after the read closes most of that window. Text read from a file that
  // fails this must not be shown.
  Status CheckStillSingle(std::string_view path, int fd) const;
  // Writes `content` as the regular file `path`, created (mode 0644) or
  // replaced (keeping its mode); missing directories on the way are created
  // (mode 0755). A dangling symlink is written through only when its target
  // is inside the root. The content is written to a new file beside the
  // name and renamed over it, so a file the name pointed at is never
  // written (see docs/security.md), and a reader never sees half of it.
  Status WriteFile(std::string_view path, std::string_view content) const;
  // An existing directory, open for reading its entries. "" and "." are
  // the root.
  Result<UniqueFd> OpenDirectory(std::string_view path) const;

 private:
  // Where a path lands: a directory and a name in it that is not a symlink
  // (or does not exist yet). An empty leaf means the directory itself.
  struct Location {
    // The directory: the root's own descriptor (borrowed: a Location
    // lives no longer than its Sandbox) or one opened on the way (owned).
    int dir = -1;
    UniqueFd owned;
    std::string leaf;
    bool exists = false;
    struct stat st = {};  // Of the leaf, when it exists (not followed).
  };
  enum class Mode { kExisting, kCreate };

  Sandbox(UniqueFd root_fd, std::string opened_as)
      : root_fd_(std::move(root_fd)), opened_as_(std::move(opened_as)) {}
  Result<Location> Resolve(std::string_view path, Mode mode) const;

  UniqueFd root_fd_;
  std::string opened_as_;  // What Open was given: realpath's, when /proc fails.
};

}  // namespace steps

#endif  // STEPS_TOOLS_SANDBOX_H_
