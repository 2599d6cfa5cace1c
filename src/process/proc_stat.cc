#include "process/proc_stat.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace steps {
namespace {

// The whole of a /proc file ("" when it cannot be read). Plain reads: a
// stream's locale and buffer setup cost more than the read, and these are
// read for every task a run starts.
// `opened` (optional) says whether the file could be opened.
std::string ReadWhole(const std::string& path, bool* opened = nullptr) {
  std::string text;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (opened) *opened = fd >= 0;
  if (fd < 0) return text;
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fd);
  return text;
}

// The whitespace-separated numbers of `text`, from `from` on.
template <typename Each>
void EachNumber(const std::string& text, size_t from, Each each) {
  const char* p = text.c_str() + from;
  const char* end = text.c_str() + text.size();
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\n')) ++p;
    if (p >= end) return;
    const char* start = p;
    while (p < end && *p != ' ' && *p != '\n') ++p;
    if (!each(std::string_view(start, static_cast<size_t>(p - start)))) return;
  }
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

// Appends the pids of a children file ("12 345 ") to `out`.
void AppendPids(const std::string& list, std::vector<pid_t>& out) {
  EachNumber(list, 0, [&](std::string_view field) {
    char* end = nullptr;
    const long pid = std::strtol(field.data(), &end, 10);
    if (end != field.data() + field.size() || pid <= 0) return false;
    out.push_back(static_cast<pid_t>(pid));
    return true;
  });
}

}  // namespace

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  const std::string stat = ReadWhole("/proc/" + std::to_string(pid) + "/stat");
  // The command (field 2) is in parentheses and may hold anything, spaces
  // and ')' included: the fields after it start after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  ProcStat s;
  s.pid = pid;
  int i = 3;
  bool complete = false;
  // Each field ends at a space, a newline or the string's end (its NUL):
  // where strtol stops, so it reads the field in place.
  EachNumber(stat, close + 1, [&](std::string_view field) {
    const char* text = field.data();
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
        complete = true;
        return false;
    }
    ++i;
    return true;
  });
  if (!complete) return std::nullopt;
  return s;
}

std::vector<pid_t> ListChildren(pid_t pid) {
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  std::vector<pid_t> tids = NumericEntries(task_dir);
  std::vector<pid_t> children;
  bool have_children_file = false;
  for (pid_t tid : tids) {
    const std::string path = task_dir + "/" + std::to_string(tid) + "/children";
    bool opened = false;
    const std::string list = ReadWhole(path, &opened);
    if (!opened) continue;
    have_children_file = true;
    AppendPids(list, children);
  }
  if (have_children_file || tids.empty()) return children;
  // Kernels built without CONFIG_PROC_CHILDREN: look at every process.
  for (const ProcStat& s : ListProcesses()) {
    if (s.ppid == pid) children.push_back(s.pid);
  }
  return children;
}

namespace {

// Whether orphans go to the group's first live thread (find_alive_thread,
// Linux 3.19 on); before, to the very thread that started their parent.
bool OrphansGoToTheFirstLiveThread() {
  static const bool yes = [] {
    struct utsname u;
    if (uname(&u) != 0) return false;
    int major = 0;
    int minor = 0;
    if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
    return major > 3 || (major == 3 && minor >= 19);
  }();
  return yes;
}

}  // namespace

std::vector<pid_t> ListSweepCandidates() {
  const pid_t self = getpid();
  if (!OrphansGoToTheFirstLiveThread()) return ListChildren(self);
  // /proc/PID/stat is the main thread's: a zombie once it has ended (the
  // process lives on in other threads), and orphans go elsewhere.
  const std::optional<ProcStat> leader = ReadProcStat(self);
  if (!leader || leader->state == 'Z' || leader->state == 'X')
    return ListChildren(self);
  const std::string task = "/proc/" + std::to_string(self) + "/task/";
  bool opened = false;
  const std::string main_list =
      ReadWhole(task + std::to_string(self) + "/children", &opened);
  if (!opened) return ListChildren(self);
  std::vector<pid_t> children;
  AppendPids(main_list, children);
  const pid_t caller = static_cast<pid_t>(syscall(SYS_gettid));
  if (caller != self) {
    AppendPids(ReadWhole(task + std::to_string(caller) + "/children"),
               children);
  }
  std::sort(children.begin(), children.end());
  children.erase(std::unique(children.begin(), children.end()),
                 children.end());
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
