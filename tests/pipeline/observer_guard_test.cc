// The observer fan-out's guard: an observer that throws is logged and the
// others still hear every event.
#include <gtest/gtest.h>

#include <stdexcept>

#include "common/log_capture.h"
#include "pipeline/observer.h"

namespace steps::pipeline {
namespace {

class Throwing : public RunObserver {
 public:
  void OnRunStart(const RunRecord&) override {
    throw std::runtime_error("store is gone");
  }
  void OnStepEnd(const StepRecord&) override { throw 7; }
};

class Counting : public RunObserver {
 public:
  void OnRunStart(const RunRecord&) override { ++events; }
  void OnStepEnd(const StepRecord&) override { ++events; }
  int events = 0;
};

TEST(ObserverGuardTest, AThrowingObserverIsLoggedAndTheOthersCarryOn) {
  test_support::LogCapture log;
  Throwing bad;
  Counting good;
  ObserverList list;
  list.Add(&bad);
  list.Add(&good);
  list.OnRunStart(RunRecord());
  list.OnStepEnd(StepRecord());
  EXPECT_EQ(good.events, 2);
  ASSERT_EQ(log.lines().size(), 2u);
  EXPECT_EQ(log.lines()[0],
            "ERR run.observer_failed event=OnRunStart error=\"store is gone\"");
  EXPECT_EQ(log.lines()[1],
            "ERR run.observer_failed event=OnStepEnd error=\"an exception that "
            "is not a std::exception\"");
}

}  // namespace
}  // namespace steps::pipeline
