#include "store/cache.h"

#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

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

std::optional<pipeline::CachedStep> StoreStepCache::Find(
    const std::string& key) {
  if (!lookups_) return std::nullopt;
  std::optional<pipeline::CachedStep> hit;
  Status s = store_.Read([&](Db& db) -> Status {
    Result<StatementUse> st =
        db.Prepared("SELECT output, outputs FROM cache WHERE key = ?1");
    if (!st.ok()) return st.status();
    (*st)->Bind(1, key);
    Result<bool> row = (*st)->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    pipeline::CachedStep entry;
    entry.output = (*st)->Text(0);
    nlohmann::json names =
        nlohmann::json::parse((*st)->Text(1), nullptr, false);
    if (!names.is_array()) return Status::Ok();
    for (const auto& n : names) {
      if (!n.is_string()) return Status::Ok();
      const std::string name = n.get<std::string>();
      fs::path saved = fs::path(cache_dir_) / key / EntryName(name);
      std::error_code ec;
      if (!fs::is_directory(saved, ec)) return Status::Ok();
      entry.outputs[name] = saved.string();
    }
    hit = std::move(entry);
    return Status::Ok();
  });
  if (!s.ok()) return std::nullopt;
  return hit;
}

void StoreStepCache::Remember(
    const std::string& key, const pipeline::StepRef& step,
    const std::string& output,
    const std::map<std::string, std::string>& outputs) {
  std::lock_guard<std::mutex> lock(files_mu_);
  const fs::path entry = fs::path(cache_dir_) / key;
  const fs::path staging = fs::path(cache_dir_) / (key + ".new");
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  nlohmann::json names = nlohmann::json::array();
  // The workspace's copy: regular files, folders and links only (never a
  // FIFO opened), holes kept.
  Status copied = Status::Ok();
  for (const auto& [name, from] : outputs) {
    copied = pipeline::CopyTree(from, (staging / EntryName(name)).string(),
                                pipeline::WorkLimit());
    if (!copied.ok()) break;
    names.push_back(name);
  }
  if (copied.ok()) {
    fs::remove_all(entry, ec);
    fs::rename(staging, entry, ec);
    if (ec) copied = IoError("save " + entry.string() + ": " + ec.message());
  }
  if (!copied.ok()) {
    fs::remove_all(staging, ec);
    LogEvent(LogLevel::kWarn, "store.cache_failed",
             {{"step", step.id}, {"error", copied.message()}});
    return;
  }
  Status s = store_.Write([&](Db& db) -> Status {
    Result<StatementUse> st = db.Prepared(
        "INSERT OR REPLACE INTO cache (key, run_id, step_id, output, outputs,"
        " created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (!st.ok()) return st.status();
    Statement& s = **st;
    s.Bind(1, key);
    s.Bind(2, run_id_);
    s.Bind(3, step.id);
    s.Bind(4, output);
    s.Bind(5, DumpJson(names));
    s.Bind(6, int64_t{std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()});
    return s.Run();
  });
  if (!s.ok()) {
    LogEvent(LogLevel::kWarn, "store.cache_failed",
             {{"step", step.id}, {"error", s.message()}});
  }
}

}  // namespace steps::store
