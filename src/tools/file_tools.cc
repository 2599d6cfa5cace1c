#include "tools/file_tools.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tools/arguments.h"
#include "tools/sandbox.h"
#include "tools/text.h"

namespace steps {
namespace {

std::string Quoted(const std::string& path) { return "'" + path + "'"; }

ToolResult ErrorFrom(const std::string& tool, const Status& status) {
  return ToolResult::Error(tool + ": " + status.message());
}

// Reads up to `max` bytes; stops early at EOF. `expected` (the size fstat
// reported) sizes the first read, plus one byte to see the end without
// another buffer; a file that grew meanwhile doubles the buffer as it goes.
// A regular file that gave exactly `expected` bytes and then fewer than
// asked for is at its end: no read more to be told so. (Anything else, a
// short read on a network file system included, reads on to the end.)
Result<std::string> ReadUpTo(int fd, size_t max, uint64_t expected,
                             bool regular, const std::string& path) {
  constexpr size_t kFirstRead = 64 * 1024;  // Pipes and /proc report 0.
  std::string data;
  const uint64_t first = expected > 0 ? expected + 1 : kFirstRead;
  data.resize(static_cast<size_t>(std::min<uint64_t>(max, first)));
  size_t got = 0;
  while (got < max) {
    if (got == data.size()) data.resize(std::min(max, data.size() * 2));
    ssize_t n = read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(Quoted(path), errno);
    if (n == 0) break;
    const size_t asked = data.size() - got;
    got += static_cast<size_t>(n);
    if (regular && expected > 0 && got == expected &&
        static_cast<size_t>(n) < asked) {
      break;
    }
  }
  data.resize(got);
  return data;
}

// Closes a DIR* (and the descriptor it owns).
struct DirCloser {
  void operator()(DIR* dir) const { closedir(dir); }
};

}  // namespace

ReadFileTool::ReadFileTool()
    : Tool("read_file",
           "Read a text file. The path is relative to the working directory.",
           StringArgumentsSchema(
               {{"path", "File to read, relative to the working directory"}})) {
}

ToolResult ReadFileTool::Run(const nlohmann::json& arguments,
                             const ToolContext& context) const {
  Result<std::string> path = StringArgument(arguments, name(), "path");
  if (!path.ok()) return ToolResult::Error(path.status().message());
  Result<Sandbox> sandbox = Sandbox::Open(context.working_dir);
  if (!sandbox.ok()) return ErrorFrom(name(), sandbox.status());
  struct stat st;
  Result<UniqueFd> file = sandbox->OpenFileForRead(*path, &st);
  if (!file.ok()) return ErrorFrom(name(), file.status());

  uint64_t size = static_cast<uint64_t>(st.st_size);
  size_t limit = context.limits.max_read_bytes;
  // One byte past the limit tells a cut file from one exactly at it, even
  // when the reported size is wrong (a file still growing).
  size_t want = limit < SIZE_MAX ? limit + 1 : limit;
  Result<std::string> data =
      ReadUpTo(file->get(), want, size, S_ISREG(st.st_mode), *path);
  if (!data.ok()) return ErrorFrom(name(), data.status());
  if (Status s = sandbox->CheckStillSingle(*path, file->get()); !s.ok())
    return ErrorFrom(name(), s);
  size = std::max<uint64_t>(size, data->size());

  if (LooksBinary(*data)) {
    return ToolResult::Error(
        name() + ": " + Quoted(*path) + " looks like a binary file (" +
        DescribeSize(size) + "); read_file returns text only");
  }
  if (data->size() <= limit) {
    if (data->empty()) return ToolResult::Ok("(empty file)");
    return ToolResult::Ok(std::move(*data));
  }
  data->resize(Utf8PrefixLength(*data, limit));
  std::string note = "[read_file: cut: showing the first " +
                     DescribeSize(data->size()) + " of " + Quoted(*path) +
                     ", which has " + DescribeSize(size) + "]";
  if (!data->empty() && data->back() != '\n') data->push_back('\n');
  return ToolResult::Ok(std::move(*data) + note);
}

WriteFileTool::WriteFileTool()
    : Tool("write_file",
           "Create or replace a file with the given content. The path is "
           "relative to the working directory; missing parent directories "
           "are created.",
           StringArgumentsSchema(
               {{"path", "File to write, relative to the working directory"},
                {"content", "The complete new content of the file"}})) {}

ToolResult WriteFileTool::Run(const nlohmann::json& arguments,
                              const ToolContext& context) const {
  Result<std::string> path = StringArgument(arguments, name(), "path");
  if (!path.ok()) return ToolResult::Error(path.status().message());
  Result<std::string> content = StringArgument(arguments, name(), "content");
  if (!content.ok()) return ToolResult::Error(content.status().message());
  if (content->size() > context.limits.max_write_bytes) {
    return ToolResult::Error(
        name() + ": refused: the content is " + DescribeSize(content->size()) +
        ", over the limit of " + DescribeSize(context.limits.max_write_bytes));
  }
  Result<Sandbox> sandbox = Sandbox::Open(context.working_dir);
  if (!sandbox.ok()) return ErrorFrom(name(), sandbox.status());
  if (Status s = sandbox->WriteFile(*path, *content); !s.ok()) {
    return ErrorFrom(name(), s);
  }
  return ToolResult::Ok("wrote " + DescribeSize(content->size()) + " to " +
                        Quoted(*path));
}

ListFilesTool::ListFilesTool()
    : Tool("list_files",
           "List the entries of a directory: files, directories (ending in "
           "'/') and symlinks ('name -> target'). The path is relative to "
           "the working directory; '.' is the working directory itself.",
           StringArgumentsSchema(
               {{"path",
                 "Directory to list, relative to the working directory"}})) {}

ToolResult ListFilesTool::Run(const nlohmann::json& arguments,
                              const ToolContext& context) const {
  Result<std::string> path =
      OptionalStringArgument(arguments, name(), "path", ".");
  if (!path.ok()) return ToolResult::Error(path.status().message());
  Result<Sandbox> sandbox = Sandbox::Open(context.working_dir);
  if (!sandbox.ok()) return ErrorFrom(name(), sandbox.status());
  Result<UniqueFd> dir_fd = sandbox->OpenDirectory(*path);
  if (!dir_fd.ok()) return ErrorFrom(name(), dir_fd.status());

  std::unique_ptr<DIR, DirCloser> dir(fdopendir(dir_fd->get()));
  if (!dir) return ErrorFrom(name(), ErrnoStatus(Quoted(*path), errno));
  dir_fd->Release();  // Owned by `dir` now.

  size_t limit = context.limits.max_list_entries;
  // Names kept for sorting; past this many only the count goes on.
  size_t keep = std::max<size_t>(limit, 1) * 10;
  std::vector<std::string> entries;
  size_t total = 0;
  while (struct dirent* entry = readdir(dir.get())) {
    std::string entry_name = entry->d_name;
    if (entry_name == "." || entry_name == "..") continue;
    ++total;
    if (entries.size() >= keep) continue;
    unsigned char type = entry->d_type;
    if (type == DT_UNKNOWN) {
      struct stat st;
      if (fstatat(dirfd(dir.get()), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
          0) {
        type = S_ISDIR(st.st_mode)   ? DT_DIR
               : S_ISLNK(st.st_mode) ? DT_LNK
                                     : DT_REG;
      }
    }
    if (type == DT_DIR) {
      entry_name += "/";
    } else if (type == DT_LNK) {
      char target[PATH_MAX];
      ssize_t n =
          readlinkat(dirfd(dir.get()), entry->d_name, target, sizeof target);
      if (n > 0) entry_name += " -> " + std::string(target, n);
    }
    entries.push_back(std::move(entry_name));
  }
  if (total == 0) return ToolResult::Ok("(empty directory)");
  std::sort(entries.begin(), entries.end());
  std::string out;
  size_t shown = 0;
  for (const std::string& entry : entries) {
    if (shown == limit ||
        out.size() + entry.size() + 1 > context.limits.max_output_bytes) {
      break;
    }
    out += entry;
    out += '\n';
    ++shown;
  }
  if (shown < total) {
    out += "[list_files: cut: showing " + std::to_string(shown) + " of " +
           std::to_string(total) + " entries]\n";
  }
  return ToolResult::Ok(std::move(out));
}

}  // namespace steps
