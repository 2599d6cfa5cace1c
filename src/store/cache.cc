#include "store/cache.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json_text.h"
#include "core/log.h"
#include "pipeline/workspace.h"

namespace steps::store {

namespace fs = std::filesystem;

namespace {

// A folder name for an output: never a path outside the entry.
std::string EntryName(const std::string& name) {
  std::string out;
  for (char c : name) {
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                   c == '_' || c == '.'
               ? c
               : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

// Printed lines as one text: per line its stream ('o' stdout, 'e' stderr),
// its length in bytes, ':' and its bytes, so any byte survives.
std::string EncodeLines(const std::vector<pipeline::PrintedLine>& lines) {
  std::string out;
  for (const pipeline::PrintedLine& l : lines) {
    out += l.stream == OutputStream::kStderr ? 'e' : 'o';
    out += std::to_string(l.text.size()) + ":" + l.text;
  }
  return out;
}

// nullopt when `text` is not what EncodeLines writes.
std::optional<std::vector<pipeline::PrintedLine>> DecodeLines(
    const std::string& text) {
  std::vector<pipeline::PrintedLine> lines;
  size_t at = 0;
  while (at < text.size()) {
    const char tag = text[at];
    const size_t colon = text.find(':', at + 1);
    if ((tag != 'o' && tag != 'e') || colon == std::string::npos ||
        colon == at + 1 || colon - at > 12)
      return std::nullopt;
    size_t size = 0;
    for (size_t i = at + 1; i < colon; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i])))
        return std::nullopt;
      size = size * 10 + static_cast<size_t>(text[i] - '0');
    }
    if (size > text.size() - colon - 1) return std::nullopt;
    lines.push_back({tag == 'e' ? OutputStream::kStderr : OutputStream::kStdout,
                     text.substr(colon + 1, size)});
    at = colon + 1 + size;
  }
  return lines;
}

// Bytes of the regular files under `dir` (links not followed).
int64_t TreeBytes(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec)) {
      const auto size = it->file_size(ec);
      if (!ec) total += static_cast<int64_t>(size);
    }
  }
  return total;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string CacheDir(const std::string& state_dir) {
  return (fs::path(state_dir) / "cache").string();
}

StoreStepCache::StoreStepCache(Store& store, std::string cache_dir,
                               std::string run_id, bool lookups)
    : store_(store),
      cache_dir_(std::move(cache_dir)),
      run_id_(std::move(run_id)),
      lookups_(lookups) {}

std::string StoreStepCache::SavedPath(const std::string& key,
                                      const std::string& name) const {
  return (fs::path(cache_dir_) / key / EntryName(name)).string();
}

void StoreStepCache::Queued::Done(const std::string& key, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = entries.find(key);
  if (it != entries.end() && it->second.second == n) entries.erase(it);
}

std::optional<pipeline::CachedStep> StoreStepCache::Find(
    const std::string& key) {
  if (!lookups_) return std::nullopt;
  {
    std::lock_guard<std::mutex> lock(queued_->mu);
    auto it = queued_->entries.find(key);
    if (it != queued_->entries.end()) {
      // Remembered by this run, its row not committed yet.
      pipeline::CachedStep entry = it->second.first;
      for (const auto& [name, saved] : entry.outputs) {
        std::error_code ec;
        if (!fs::is_directory(saved, ec)) return std::nullopt;
      }
      return entry;
    }
  }
  std::optional<pipeline::CachedStep> hit;
  auto read = [&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "SELECT output, outputs, exit_code, lines, run_id, step_id FROM cache"
        " WHERE key = ?1 AND format = ?2");
    if (!st.ok()) return st.status();
    (*st)->Bind(1, key);
    (*st)->Bind(2, int64_t{kCacheFormat});
    Result<bool> row = (*st)->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    pipeline::CachedStep entry;
    entry.output = (*st)->Text(0);
    if (std::optional<int64_t> code = (*st)->OptionalInt(2))
      entry.exit_code = static_cast<int>(*code);
    std::optional<std::vector<pipeline::PrintedLine>> lines =
        DecodeLines((*st)->Text(3));
    if (!lines) return Status::Ok();
    entry.lines = std::move(*lines);
    entry.from_run = (*st)->Text(4);
    entry.from_step = (*st)->Text(5);
    nlohmann::json names =
        nlohmann::json::parse((*st)->Text(1), nullptr, false);
    if (!names.is_array()) return Status::Ok();
    for (const auto& n : names) {
      if (!n.is_string()) return Status::Ok();
      const std::string name = n.get<std::string>();
      std::string saved = SavedPath(key, name);
      std::error_code ec;
      if (!fs::is_directory(saved, ec)) return Status::Ok();
      entry.outputs[name] = std::move(saved);
    }
    hit = std::move(entry);
    return Status::Ok();
  };
  if (!store_.ReadCommitted(read).ok()) return std::nullopt;
  return hit;
}

Result<int64_t> StoreStepCache::SaveOutputs(const std::string& key,
                                            const pipeline::CachedStep& result,
                                            std::vector<std::string>& names) {
  const fs::path entry = fs::path(cache_dir_) / key;
  std::error_code ec;
  if (result.outputs.empty()) {
    // Nothing to keep on disk (a step without outputs is all in the row):
    // no folder is made, and one left by an older entry goes.
    fs::remove_all(entry, ec);
    return int64_t{0};
  }
  const fs::path staging = fs::path(cache_dir_) / (key + ".new");
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  // The workspace's copy: regular files, folders and links only (never a
  // FIFO opened), holes kept.
  Status copied = Status::Ok();
  for (const auto& [name, from] : result.outputs) {
    copied = pipeline::CopyTree(from, (staging / EntryName(name)).string(),
                                pipeline::WorkLimit());
    if (!copied.ok()) break;
    names.push_back(name);
  }
  const int64_t bytes = TreeBytes(staging);
  if (copied.ok()) {
    fs::remove_all(entry, ec);
    fs::rename(staging, entry, ec);
    if (ec) copied = IoError("save " + entry.string() + ": " + ec.message());
  }
  if (!copied.ok()) {
    fs::remove_all(staging, ec);
    return copied;
  }
  return bytes;
}

void StoreStepCache::Remember(const std::string& key,
                              const pipeline::StepRef& step,
                              const pipeline::CachedStep& result) {
  // A full disk keeps its room for the run's records (Store::disk_full):
  // no copies of output folders, no entry.
  if (store_.disk_full()) return;
  std::vector<std::string> names;
  const std::string lines = EncodeLines(result.lines);
  int64_t size = static_cast<int64_t>(result.output.size() + lines.size());
  {
    std::lock_guard<std::mutex> lock(files_mu_);
    Result<int64_t> saved = SaveOutputs(key, result, names);
    if (!saved.ok()) {
      LogEvent(LogLevel::kWarn, "store.cache_failed",
               {{"step", step.id}, {"error", saved.status().message()}});
      return;
    }
    size += *saved;
  }
  // Found as it is remembered until its row is committed (Find).
  pipeline::CachedStep found;
  found.output = result.output;
  found.exit_code = result.exit_code;
  found.lines = result.lines;
  found.from_run = run_id_;
  found.from_step = step.id;
  for (const std::string& name : names)
    found.outputs[name] = SavedPath(key, name);
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(queued_->mu);
    n = ++queued_->next;
    queued_->entries[key] = {std::move(found), n};
  }
  // The entry rides with the step's end (no durable point: an entry lost
  // to a kill only means the step runs again next time).
  store_.WriteSoon(
      [key, run_id = run_id_, step_id = step.id, output = result.output,
       names = DumpJson(nlohmann::json(names)), created = NowMs(),
       step_name = step.name, exit_code = result.exit_code, lines, size,
       queued = queued_, n](Db& db) -> Status {
        // Committed with this transaction, or lost with it: either way the
        // entry is no longer this run's to answer from memory.
        queued->Done(key, n);
        Result<StatementUse> st = db.Prepared(
            "INSERT OR REPLACE INTO cache (key, run_id, step_id, output,"
            " outputs, created_ms, step_name, exit_code, lines, size_bytes,"
            " format) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
        if (!st.ok()) return st.status();
        Statement& s = **st;
        s.Bind(1, key);
        s.Bind(2, run_id);
        s.Bind(3, step_id);
        s.Bind(4, output);
        s.Bind(5, names);
        s.Bind(6, created);
        s.Bind(7, step_name);
        if (exit_code) {
          s.Bind(8, int64_t{*exit_code});
        } else {
          s.BindNull(8);
        }
        s.Bind(9, lines);
        s.Bind(10, size);
        s.Bind(11, int64_t{kCacheFormat});
        return s.Run();
      },
      [step_id = step.id, key, queued = queued_, n](const Status& s) {
        queued->Done(key, n);
        LogEvent(LogLevel::kWarn, "store.cache_failed",
                 {{"step", step_id}, {"error", s.message()}});
      },
      static_cast<size_t>(size), Store::Soon::kPayload);
}

Result<std::vector<CacheEntryInfo>> ListCacheEntries(Store& store) {
  std::vector<CacheEntryInfo> entries;
  Status s = store.Read([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "SELECT key, run_id, step_id, step_name, created_ms, size_bytes,"
        " format FROM cache ORDER BY created_ms DESC, key");
    if (!st.ok()) return st.status();
    return (*st)->EachRow([&](const Statement& row) {
      CacheEntryInfo e;
      e.key = row.Text(0);
      e.run_id = row.Text(1);
      e.step_id = row.Text(2);
      e.step_name = row.Text(3);
      e.created_ms = row.Int(4);
      e.size_bytes = row.Int(5);
      e.usable = row.Int(6) == kCacheFormat;
      entries.push_back(std::move(e));
    });
  });
  if (!s.ok()) return s;
  return entries;
}

Result<int64_t> ClearCacheEntries(Store& store, const std::string& cache_dir,
                                  const CacheClearFilter& filter) {
  // The rows go in one transaction; their folders after (a folder left by
  // a failed removal belongs to no entry and is never read).
  std::vector<std::string> keys;
  Status s = store.Write([&](Db& db) -> Status {
    const std::string where =
        " WHERE (?1 IS NULL OR step_name = ?1 OR step_id = ?1)"
        " AND (?2 IS NULL OR created_ms < ?2)";
    Result<StatementUse> st = db.Prepared("SELECT key FROM cache" + where);
    if (!st.ok()) return st.status();
    auto bind = [&](Statement& q) {
      if (filter.step) {
        q.Bind(1, *filter.step);
      } else {
        q.BindNull(1);
      }
      q.Bind(2, filter.created_before_ms);
    };
    bind(**st);
    Status listed = (*st)->EachRow(
        [&](const Statement& row) { keys.push_back(row.Text(0)); });
    if (!listed.ok()) return listed;
    Result<StatementUse> del = db.Prepared("DELETE FROM cache" + where);
    if (!del.ok()) return del.status();
    bind(**del);
    return (*del)->Run();
  });
  if (!s.ok()) return s;
  for (const std::string& key : keys) {
    std::error_code ec;
    fs::remove_all(fs::path(cache_dir) / key, ec);
    if (ec) {
      LogEvent(LogLevel::kWarn, "store.cache_failed",
               {{"key", key}, {"error", ec.message()}});
    }
  }
  return static_cast<int64_t>(keys.size());
}

namespace {

std::string Age(int64_t ms) {
  const int64_t s = std::max<int64_t>(ms, 0) / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string Size(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  std::ostringstream out;
  out.precision(1);
  out << std::fixed;
  if (bytes < 1024 * 1024) {
    out << static_cast<double>(bytes) / 1024 << " KiB";
  } else {
    out << static_cast<double>(bytes) / (1024 * 1024) << " MiB";
  }
  return out.str();
}

std::string Pad(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

}  // namespace

std::string FormatCacheEntries(const std::vector<CacheEntryInfo>& entries,
                               int64_t now_ms) {
  std::vector<std::string> steps;
  size_t step_width = 4;
  for (const CacheEntryInfo& e : entries) {
    std::string step = e.step_id;
    if (!e.step_name.empty()) step += " (" + e.step_name + ")";
    if (!e.usable) step += " [old format, never used]";
    step_width = std::max(step_width, step.size());
    steps.push_back(std::move(step));
  }
  std::ostringstream out;
  out << "KEY       " << Pad("STEP", step_width) << "  " << Pad("RUN", 22)
      << "  AGE   SIZE\n";
  int64_t total = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const CacheEntryInfo& e = entries[i];
    total += e.size_bytes;
    out << Pad(e.key.substr(0, 8), 8) << "  " << Pad(steps[i], step_width)
        << "  " << Pad(e.run_id, 22) << "  "
        << Pad(Age(now_ms - e.created_ms), 4) << "  " << Size(e.size_bytes)
        << "\n";
  }
  out << entries.size() << (entries.size() == 1 ? " entry, " : " entries, ")
      << Size(total) << "\n";
  return out.str();
}

}  // namespace steps::store
