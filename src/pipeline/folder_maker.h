// Makes folders ahead of the steps that need them, on a thread of its own.
//
// A task step runs in a working folder of its own, and making a folder can
// cost far more than the step's own work: on ext4 without a journal, a
// folder made soon after many were deleted waits while the allocator skips
// the inodes they freed. The job knows which task comes next, so it asks
// for that one's folder while the current step runs; when the next step
// starts, its folder is there. Nothing changes in what is made or where:
// Make returns once the folder exists, whoever made it.
//
// Thread-safe. Folders made ahead that no step claimed (the job stopped
// before it, or the step was taken from the cache) are removed when the
// maker is destroyed, if they are still empty.
#ifndef STEPS_PIPELINE_FOLDER_MAKER_H_
#define STEPS_PIPELINE_FOLDER_MAKER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "core/fiber.h"
#include "core/status.h"

namespace steps::pipeline {

class FolderMaker {
 public:
  // Makes `path` and its missing parents; Ok when it is a folder now.
  // Whether it made `path` itself goes to `made` (false: it was there).
  using MakeFn = std::function<Status(const std::string& path, bool* made)>;
  // Removes `path` when it is an empty folder.
  using RemoveFn = std::function<void(const std::string& path)>;

  FolderMaker();  // On the real filesystem.
  FolderMaker(MakeFn make, RemoveFn remove);
  ~FolderMaker();
  FolderMaker(const FolderMaker&) = delete;
  FolderMaker& operator=(const FolderMaker&) = delete;

  // Asks for `path` to be made soon, off the caller's thread. A path asked
  // for already (and not yet claimed) is not asked for again.
  void Ahead(const std::string& path);
  // Returns once `path` exists as a folder, or why it cannot: waits for
  // the making asked for ahead when it is under way, makes it here when it
  // is not (still queued, or never asked for).
  Status Make(const std::string& path);

  // Folders made ahead of a Make, and made by Make itself (tests).
  int64_t made_ahead() const;
  int64_t made_here() const;

 private:
  enum class State { kQueued, kMaking, kDone };
  struct Entry {
    State state = State::kQueued;
    Status status;
    bool made = false;  // Made by this maker (not there before).
  };
  void Loop();

  MakeFn make_;
  RemoveFn remove_;
  mutable std::mutex mu_;
  std::condition_variable wake_;  // The thread: work queued, or stop.
  FiberCondVar done_;  // Make: an entry became kDone.
  std::map<std::string, Entry> entries_;  // Asked for, not yet claimed.
  std::deque<std::string> queue_;
  bool stopping_ = false;
  int64_t made_ahead_ = 0;
  int64_t made_here_ = 0;
  std::thread thread_;  // Started by the first Ahead.
};

}  // namespace steps::pipeline

#endif  // STEPS_PIPELINE_FOLDER_MAKER_H_
