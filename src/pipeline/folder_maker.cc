#include "pipeline/folder_maker.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

namespace steps::pipeline {

namespace fs = std::filesystem;

namespace {

Status MakeOnDisk(const std::string& path, bool* made) {
  *made = false;
  if (mkdir(path.c_str(), 0777) == 0) {
    *made = true;
    return Status::Ok();
  }
  int err = errno;
  if (err == ENOENT) {  // A parent is missing: make the parents first.
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    if (ec) return IoError("cannot create " + path + ": " + ec.message());
    if (mkdir(path.c_str(), 0777) == 0) {
      *made = true;
      return Status::Ok();
    }
    err = errno;
  }
  struct stat st;
  if (err == EEXIST && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::Ok();
  }
  if (err == EEXIST) err = ENOTDIR;
  return IoError("cannot create " + path + ": " +
                 std::generic_category().message(err));
}

void RemoveIfEmpty(const std::string& path) { (void)rmdir(path.c_str()); }

}  // namespace

FolderMaker::FolderMaker() : FolderMaker(MakeOnDisk, RemoveIfEmpty) {}

FolderMaker::FolderMaker(MakeFn make, RemoveFn remove)
    : make_(std::move(make)), remove_(std::move(remove)) {}

FolderMaker::~FolderMaker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (const auto& [path, entry] : entries_) {
    if (entry.state == State::kDone && entry.made) remove_(path);
  }
}

void FolderMaker::Ahead(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !entries_.emplace(path, Entry{}).second) return;
    queue_.push_back(path);
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  }
  wake_.notify_one();
}

Status FolderMaker::Make(const std::string& path) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = entries_.find(path);
  if (it != entries_.end() && it->second.state != State::kQueued) {
    done_.Wait(lock, [&] { return it->second.state == State::kDone; });
    Status status = it->second.status;
    entries_.erase(it);
    return status;
  }
  // Not under way: made here, and taken off the queue (the thread skips
  // paths it no longer finds queued).
  if (it != entries_.end()) entries_.erase(it);
  ++made_here_;
  lock.unlock();
  bool made = false;
  return make_(path, &made);
}

void FolderMaker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    std::string path = std::move(queue_.front());
    queue_.pop_front();
    auto it = entries_.find(path);
    if (it == entries_.end() || it->second.state != State::kQueued) continue;
    it->second.state = State::kMaking;
    ++made_ahead_;
    lock.unlock();
    bool made = false;
    Status status = make_(path, &made);
    lock.lock();
    // Entries are erased only once kDone (Make waits for that), so `it`
    // still points at this path's entry.
    it->second.state = State::kDone;
    it->second.status = std::move(status);
    it->second.made = made;
    done_.NotifyAll();
  }
}

int64_t FolderMaker::made_ahead() const {
  std::lock_guard<std::mutex> lock(mu_);
  return made_ahead_;
}

int64_t FolderMaker::made_here() const {
  std::lock_guard<std::mutex> lock(mu_);
  return made_here_;
}

}  // namespace steps::pipeline
