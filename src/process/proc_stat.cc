#include "process/proc_stat.h"

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

namespace steps {
namespace {

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

// The numeric entries of a /proc folder (pids, or thread ids).
std::vector<pid_t> NumericEntries(const std::string& dir) {
  std::vector<pid_t> ids;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ids;
  while (struct dirent* entry = readdir(d)) {
    char* end = nullptr;
    long id = std::strtol(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && id > 0) {
      ids.push_back(static_cast<pid_t>(id));
    }
  }
  closedir(d);
  return ids;
}

}  // namespace

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::string stat = ReadWhole("/proc/" + std::to_string(pid) + "/stat");
  // The command (field 2) is in parentheses and may hold anything, spaces
  // and ')' included: the fields after it start after the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  ProcStat s;
  s.pid = pid;
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    const char* text = field.c_str();
    switch (i) {
      case 3:
        s.state = field[0];
        break;
      case 4:
        s.ppid = static_cast<pid_t>(std::strtol(text, nullptr, 10));
        break;
      case 5:
        s.pgid = static_cast<pid_t>(std::strtol(text, nullptr, 10));
        break;
      case 6:
        s.session = static_cast<pid_t>(std::strtol(text, nullptr, 10));
        break;
      case 22:
        s.start_time = std::strtoull(text, nullptr, 10);
        return s;
    }
  }
  return std::nullopt;
}

std::vector<pid_t> ListChildren(pid_t pid) {
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  std::vector<pid_t> tids = NumericEntries(task_dir);
  std::vector<pid_t> children;
  bool have_children_file = false;
  for (pid_t tid : tids) {
    std::ifstream in(task_dir + "/" + std::to_string(tid) + "/children");
    if (!in) continue;
    have_children_file = true;
    pid_t child;
    while (in >> child) children.push_back(child);
  }
  if (have_children_file || tids.empty()) return children;
  // Kernels built without CONFIG_PROC_CHILDREN: look at every process.
  for (const ProcStat& s : ListProcesses()) {
    if (s.ppid == pid) children.push_back(s.pid);
  }
  return children;
}

std::vector<ProcStat> ListProcesses() {
  std::vector<ProcStat> all;
  for (pid_t pid : NumericEntries("/proc")) {
    if (std::optional<ProcStat> s = ReadProcStat(pid)) all.push_back(*s);
  }
  return all;
}

std::optional<std::string> ReadProcEnv(pid_t pid, const std::string& name) {
  std::string env = ReadWhole("/proc/" + std::to_string(pid) + "/environ");
  const std::string prefix = name + "=";
  size_t start = 0;
  while (start < env.size()) {
    size_t end = env.find('\0', start);
    if (end == std::string::npos) end = env.size();
    if (env.compare(start, prefix.size(), prefix) == 0) {
      return env.substr(start + prefix.size(), end - start - prefix.size());
    }
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace steps
