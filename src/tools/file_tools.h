// The file tools: read_file, write_file and list_files, all confined to the
// context's working directory by a Sandbox.
#ifndef STEPS_TOOLS_FILE_TOOLS_H_
#define STEPS_TOOLS_FILE_TOOLS_H_

#include "tools/tool.h"

namespace steps {

// read_file {path}: the file's text, cut at limits.max_read_bytes (on a
// character boundary) with a note giving the file's size. A file holding
// NUL bytes is reported as binary, not shown.
class ReadFileTool : public Tool {
 public:
  ReadFileTool();
  bool has_effects() const override { return false; }

 protected:
  ToolResult Run(const nlohmann::json& arguments,
                 const ToolContext& context) const override;
};

// write_file {path, content}: creates or replaces the file, creating missing
// parent directories inside the working directory. Content over
// limits.max_write_bytes is refused.
class WriteFileTool : public Tool {
 public:
  WriteFileTool();

 protected:
  ToolResult Run(const nlohmann::json& arguments,
                 const ToolContext& context) const override;
};

// list_files {path}: the entries of one directory ("." when path is empty
// or missing), sorted, one per line: "name", "dir/", "link -> target".
// At most limits.max_list_entries, with a note when there are more.
class ListFilesTool : public Tool {
 public:
  ListFilesTool();
  bool has_effects() const override { return false; }

 protected:
  ToolResult Run(const nlohmann::json& arguments,
                 const ToolContext& context) const override;
};

}  // namespace steps

#endif  // STEPS_TOOLS_FILE_TOOLS_H_
