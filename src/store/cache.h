// The step cache kept in the run store: entries in the `cache` table, the
// output folders of each entry under CACHE_DIR/KEY/. See step_cache.h for
// the key and docs/store.md for the rules. Also what `steps cache ls` and
// `steps cache clear` read and remove.
#ifndef STEPS_STORE_CACHE_H_
#define STEPS_STORE_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "pipeline/step_cache.h"
#include "store/store.h"

namespace steps::store {

// The form of the entries this steps writes (the `format` column). Entries
// of an older form (written before keys covered what answers an agent
// step, exit codes and printed lines) are never found: they simply miss.
inline constexpr int kCacheFormat = 2;

// STATE_DIR/cache.
std::string CacheDir(const std::string& state_dir);

class StoreStepCache : public pipeline::StepCache {
 public:
  // `store` must outlive the cache. Entries are recorded as coming from
  // `run_id`. With `lookups` false (--no-cache) Find always misses, while
  // succeeded steps are still remembered for later runs.
  StoreStepCache(Store& store, std::string cache_dir, std::string run_id,
                 bool lookups);

  // A miss too when a saved output folder has gone missing, or the entry
  // is of an older format.
  std::optional<pipeline::CachedStep> Find(const std::string& key) override;
  // Copies the output folders into CACHE_DIR/KEY/NAME (replacing an older
  // entry's; a step without outputs has no folder) and then records the
  // entry.
  void Remember(const std::string& key, const pipeline::StepRef& step,
                const pipeline::CachedStep& result) override;

 private:
  // Under files_mu_: copies the outputs into CACHE_DIR/KEY (no folder when
  // there are none), appending their names; returns the bytes saved.
  Result<int64_t> SaveOutputs(const std::string& key,
                              const pipeline::CachedStep& result,
                              std::vector<std::string>& names);

  // Where output folder `name` of entry `key` is kept: CACHE_DIR/KEY/NAME.
  std::string SavedPath(const std::string& key, const std::string& name) const;

  Store& store_;
  std::string cache_dir_;
  std::string run_id_;
  bool lookups_;
  std::mutex files_mu_;  // One entry's folders are written at a time.
  // The entries this cache remembered whose rows are still queued (they
  // ride with the next write): a Find of one answers from here, so that a
  // lookup never commits the store's queue, nor waits for a store another
  // process holds. Other keys are read as committed (Store::ReadCommitted).
  // A queued write that was committed or dropped takes its entry out; the
  // queue's bounds bound this.
  struct Queued {
    std::mutex mu;
    // By key: the entry, and which Remember of the key put it here.
    std::map<std::string, std::pair<pipeline::CachedStep, uint64_t>> entries;
    uint64_t next = 0;
    // Takes `key` out if Remember number `n` still holds it.
    void Done(const std::string& key, uint64_t n);
  };
  std::shared_ptr<Queued> queued_ = std::make_shared<Queued>();
};

// One entry as `steps cache ls` lists it.
struct CacheEntryInfo {
  std::string key;
  std::string run_id;     // The run whose step produced it.
  std::string step_id;    // "JOB:2".
  std::string step_name;  // "" for entries of an older format.
  int64_t created_ms = 0;
  int64_t size_bytes = 0;  // Output, printed lines and saved folders.
  bool usable = true;      // False: an older format, never found.
};

// Every entry, newest first.
Result<std::vector<CacheEntryInfo>> ListCacheEntries(Store& store);

// Which entries `steps cache clear` removes: all, or those of a step
// (its name or its id, "JOB:2") and/or created before a time.
struct CacheClearFilter {
  std::optional<std::string> step;
  std::optional<int64_t> created_before_ms;
};

// Removes the matching entries and their saved folders under `cache_dir`;
// returns how many entries went.
Result<int64_t> ClearCacheEntries(Store& store, const std::string& cache_dir,
                                  const CacheClearFilter& filter);

// `ls` as text: one line per entry (key prefix, step, run, age, size) under
// a header, and a last line with the count and total size. `now_ms` is the
// time ages are counted to.
std::string FormatCacheEntries(const std::vector<CacheEntryInfo>& entries,
                               int64_t now_ms);

}  // namespace steps::store

#endif  // STEPS_STORE_CACHE_H_
