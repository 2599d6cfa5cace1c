// FolderMaker: folders asked for ahead are made once, on the maker's
// thread; Make waits for one under way, makes one still queued itself, and
// passes on errors; folders made ahead and never claimed are removed when
// the maker ends, unless something was put in them or they were there
// before. Synchronised with latches in the injected make function, never
// with sleeps.
#include "pipeline/folder_maker.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace steps::pipeline {
namespace {

namespace fs = std::filesystem;

// A make function that records each call and, for paths it is told to
// hold, blocks until released.
class ScriptedMake {
 public:
  FolderMaker::MakeFn Fn() {
    return [this](const std::string& path, bool* made) {
      std::unique_lock<std::mutex> lock(mu_);
      ++calls_[path];
      started_.notify_all();
      cv_.wait(lock, [&] { return !held_.count(path); });
      *made = true;
      auto error = errors_.find(path);
      return error == errors_.end() ? Status::Ok() : error->second;
    };
  }
  FolderMaker::RemoveFn Remove() {
    return [this](const std::string& path) {
      std::lock_guard<std::mutex> lock(mu_);
      removed_.push_back(path);
    };
  }
  void Hold(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    held_.insert(path);
  }
  void Release(const std::string& path) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_.erase(path);
    }
    cv_.notify_all();
  }
  void Fail(const std::string& path, Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    errors_[path] = std::move(status);
  }
  // Blocks until the make of `path` has begun.
  void WaitStarted(const std::string& path) {
    std::unique_lock<std::mutex> lock(mu_);
    started_.wait(lock, [&] { return calls_[path] > 0; });
  }
  int calls(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[path];
  }
  std::vector<std::string> removed() {
    std::lock_guard<std::mutex> lock(mu_);
    return removed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_, started_;
  std::set<std::string> held_;
  std::map<std::string, int> calls_;
  std::map<std::string, Status> errors_;
  std::vector<std::string> removed_;
};

TEST(FolderMakerTest, MakeWaitsForTheFolderMadeAheadAndDoesNotMakeItAgain) {
  ScriptedMake script;
  script.Hold("a");
  FolderMaker maker(script.Fn(), script.Remove());
  maker.Ahead("a");
  script.WaitStarted("a");
  std::future<Status> made =
      std::async(std::launch::async, [&] { return maker.Make("a"); });
  EXPECT_EQ(made.wait_for(std::chrono::milliseconds(50)),
            std::future_status::timeout)
      << "Make returned before the folder was made";
  script.Release("a");
  EXPECT_TRUE(made.get().ok());
  EXPECT_EQ(script.calls("a"), 1);
  EXPECT_EQ(maker.made_ahead(), 1);
  EXPECT_EQ(maker.made_here(), 0);
}

TEST(FolderMakerTest, AFolderStillQueuedIsMadeByMakeAndOnlyOnce) {
  ScriptedMake script;
  script.Hold("a");
  FolderMaker maker(script.Fn(), script.Remove());
  maker.Ahead("a");
  script.WaitStarted("a");  // The thread is busy with "a"...
  maker.Ahead("b");         // ...so "b" waits in the queue.
  maker.Ahead("b");         // Asked for twice: queued once.
  EXPECT_TRUE(maker.Make("b").ok());
  EXPECT_EQ(maker.made_here(), 1);
  script.Hold("c");
  maker.Ahead("c");  // Queued behind "b": once it starts, "b" was passed.
  script.Release("a");
  script.WaitStarted("c");
  EXPECT_EQ(script.calls("b"), 1) << "the thread made the claimed one again";
  EXPECT_EQ(script.calls("a"), 1);
  script.Release("c");
  EXPECT_TRUE(maker.Make("a").ok());
  EXPECT_TRUE(maker.Make("c").ok());
  EXPECT_EQ(maker.made_ahead(), 2);
}

TEST(FolderMakerTest, AnErrorMakingAheadIsWhatMakeReturns) {
  ScriptedMake script;
  script.Hold("a");
  script.Fail("a", IoError("cannot create a: No space left on device"));
  FolderMaker maker(script.Fn(), script.Remove());
  maker.Ahead("a");
  script.WaitStarted("a");
  script.Release("a");
  Status s = maker.Make("a");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "cannot create a: No space left on device");
}

TEST(FolderMakerTest, FoldersMadeAheadAndNeverClaimedAreRemovedAtTheEnd) {
  ScriptedMake script;
  {
    script.Hold("claimed");
    script.Hold("unclaimed");
    FolderMaker maker(script.Fn(), script.Remove());
    maker.Ahead("claimed");
    maker.Ahead("unclaimed");
    script.Release("claimed");
    EXPECT_TRUE(maker.Make("claimed").ok());
    script.WaitStarted("unclaimed");
    script.Release("unclaimed");
  }
  EXPECT_EQ(script.removed(), std::vector<std::string>{"unclaimed"});
}

class FolderMakerDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/steps-folders-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(FolderMakerDiskTest, MakesMissingParentsAndRefusesAFileInTheWay) {
  FolderMaker maker;
  const std::string deep = dir_ + "/work/1-build";
  EXPECT_TRUE(maker.Make(deep).ok());
  EXPECT_TRUE(fs::is_directory(deep));
  EXPECT_TRUE(maker.Make(deep).ok()) << "a folder that is there is fine";
  std::ofstream(dir_ + "/work/2-file") << "x";
  Status s = maker.Make(dir_ + "/work/2-file");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "cannot create " + dir_ + "/work/2-file: Not a directory");
}

TEST_F(FolderMakerDiskTest, OnlyEmptyFoldersItMadeItselfAreRemoved) {
  const std::string before = dir_ + "/work/there-before";
  const std::string used = dir_ + "/work/used";
  const std::string unused = dir_ + "/work/unused";
  fs::create_directories(before);
  // A real make that says when it is done, so the test knows the thread
  // finished without claiming the folders.
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  FolderMaker::MakeFn real = [&](const std::string& path, bool* made) {
    std::error_code ec;
    *made = fs::create_directory(path, ec);
    {
      std::lock_guard<std::mutex> lock(mu);
      ++done;
    }
    cv.notify_all();
    return ec ? IoError(ec.message()) : Status::Ok();
  };
  {
    FolderMaker maker(real, [](const std::string& path) {
      std::error_code ec;
      fs::remove(path, ec);  // Removes only an empty folder.
    });
    maker.Ahead(before);
    maker.Ahead(used);
    maker.Ahead(unused);
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done == 3; });
    lock.unlock();
    std::ofstream(used + "/left") << "x";
  }
  EXPECT_TRUE(fs::is_directory(before)) << "it was there before";
  EXPECT_TRUE(fs::exists(used + "/left")) << "a folder with a file is kept";
  EXPECT_FALSE(fs::exists(unused)) << "an empty folder made ahead is removed";
}

}  // namespace
}  // namespace steps::pipeline
