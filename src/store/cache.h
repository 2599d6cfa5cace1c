// The step cache kept in the run store: entries in the `cache` table, the
// output folders of each entry under CACHE_DIR/KEY/. See step_cache.h for
// the key and docs/store.md for the rules.
#ifndef STEPS_STORE_CACHE_H_
#define STEPS_STORE_CACHE_H_

#include <mutex>
#include <string>

#include "pipeline/step_cache.h"
#include "store/store.h"

namespace steps::store {

// STATE_DIR/cache.
std::string CacheDir(const std::string& state_dir);

class StoreStepCache : public pipeline::StepCache {
 public:
  // `store` must outlive the cache. Entries are recorded as coming from
  // `run_id`. With `lookups` false (--no-cache) Find always misses, while
  // succeeded steps are still remembered for later runs.
  StoreStepCache(Store& store, std::string cache_dir, std::string run_id,
                 bool lookups);

  // A miss too when a saved output folder has gone missing.
  std::optional<pipeline::CachedStep> Find(const std::string& key) override;
  // Copies the output folders into CACHE_DIR/KEY/NAME (replacing an older
  // entry's) and then records the entry.
  void Remember(const std::string& key, const pipeline::StepRef& step,
                const std::string& output,
                const std::map<std::string, std::string>& outputs) override;

 private:
  Store& store_;
  std::string cache_dir_;
  std::string run_id_;
  bool lookups_;
  std::mutex files_mu_;  // One entry's folders are written at a time.
};

}  // namespace steps::store

#endif  // STEPS_STORE_CACHE_H_
