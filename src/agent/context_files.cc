#include "agent/context_files.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/text.h"

namespace steps::agent {
namespace {

namespace fs = std::filesystem;

Result<std::string> ReadWhole(const fs::path& path, const std::string& shown) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return NotFound("context_paths: " + shown + ": no such file");
  }
  if (fs::is_directory(path, ec)) {
    return IoError("context_paths: " + shown + ": is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ErrnoStatus("context_paths: " + shown + ": cannot read", errno);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return IoError("context_paths: " + shown + ": read failed");
  }
  return text.str();
}

}  // namespace

Result<std::vector<std::string>> ReadContextFiles(
    const std::vector<std::string>& paths, const std::string& working_dir,
    std::optional<int64_t> max_bytes) {
  const bool bounded = max_bytes && *max_bytes > 0;
  uint64_t left = bounded ? static_cast<uint64_t>(*max_bytes) : 0;
  std::vector<std::string> messages;
  for (const std::string& shown : paths) {
    fs::path path(shown);
    if (path.is_relative()) path = fs::path(working_dir) / path;
    Result<std::string> content = ReadWhole(path, shown);
    if (!content.ok()) return content.status();
    const std::string& text = *content;
    std::string header = "Context file: " + shown + " (" +
                         std::to_string(text.size()) +
                         (text.size() == 1 ? " byte" : " bytes");
    if (LooksBinary(text)) {
      messages.push_back(header + "; binary, not shown)");
      continue;
    }
    if (!bounded || text.size() <= left) {
      if (bounded) left -= text.size();
      messages.push_back(header + ")\n\n" + SanitizeUtf8(text));
      continue;
    }
    if (left == 0) {
      messages.push_back(header + "; not shown: max_context_bytes (" +
                         std::to_string(*max_bytes) +
                         ") is used up by the files before it)");
      continue;
    }
    size_t keep = Utf8PrefixLength(text, static_cast<size_t>(left));
    left -= keep;
    messages.push_back(header + "; cut: the first " + std::to_string(keep) +
                       " of " + std::to_string(text.size()) +
                       " bytes are shown; max_context_bytes is " +
                       std::to_string(*max_bytes) + ")\n\n" +
                       SanitizeUtf8(std::string_view(text).substr(0, keep)));
  }
  return messages;
}

}  // namespace steps::agent
