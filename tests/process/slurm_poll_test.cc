// SlurmStatePoll against a stand-in for squeue (the real one is asked in
// tests/slurm): one question a period for all the jobs watched.
#include "process/slurm_poll.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace steps {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Answers each squeue with what `answer` makes of its request; keeps them.
class FakeSqueue : public ProcessLauncher {
 public:
  ProcessResult Run(const ProcessRequest& request) override {
    std::lock_guard<std::mutex> lock(mu_);
    requests.push_back(request);
    return answer(request);
  }
  std::vector<ProcessRequest> Requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests;
  }
  std::function<ProcessResult(const ProcessRequest&)> answer;

 private:
  std::mutex mu_;
  std::vector<ProcessRequest> requests;
};

ProcessResult Exited(int code, std::string out, std::string err = "") {
  ProcessResult r;
  r.end = ProcessEnd::kExited;
  r.exit_code = code;
  r.out.text = std::move(out);
  r.err.text = std::move(err);
  return r;
}

// The ids a request asked of ("--jobs=1,2").
std::string Jobs(const ProcessRequest& r) {
  for (const std::string& a : r.argv)
    if (a.rfind("--jobs=", 0) == 0) return a.substr(7);
  return "";
}

TEST(SlurmStatePollTest, OneQuestionAPeriodAnswersEveryJob) {
  FakeClock clock;
  FakeSqueue squeue;
  squeue.answer = [](const ProcessRequest&) {
    return Exited(0,
                  "JobId=1 JobState=RUNNING Reason=None NodeList=n1\n"
                  "JobId=2 JobState=PENDING Reason=Priority NodeList=\n");
  };
  SlurmStatePoll poll(squeue, clock, "/usr/bin/squeue", 1000ms);
  poll.Add("1");
  poll.Add("2");
  poll.Add("3");
  EXPECT_EQ(poll.Line("1"), "JobId=1 JobState=RUNNING Reason=None NodeList=n1");
  EXPECT_EQ(poll.Line("2"),
            "JobId=2 JobState=PENDING Reason=Priority NodeList=");
  // Asked of and not in the answer: it cannot tell (an squeue that prints
  // nothing must not end every job).
  EXPECT_EQ(poll.Line("3"), "");
  ASSERT_EQ(squeue.Requests().size(), 1u);
  const ProcessRequest q = squeue.Requests()[0];
  EXPECT_EQ(q.argv[0], "/usr/bin/squeue");
  EXPECT_EQ(Jobs(q), "1,2,3");
  EXPECT_THAT(q.argv, ::testing::Contains("--states=all"));
  EXPECT_THAT(q.env_unset, ::testing::Contains("SQUEUE_USERS"));
  // Within the period the answer stands; at its end, one more question.
  clock.Advance(999ms);
  poll.Line("1");
  poll.Line("2");
  EXPECT_EQ(squeue.Requests().size(), 1u);
  clock.Advance(1ms);
  poll.Line("2");
  poll.Line("1");
  EXPECT_EQ(squeue.Requests().size(), 2u);
  EXPECT_EQ(poll.questions(), 2);
}

TEST(SlurmStatePollTest, AJobAddedAfterTheAnswerWaitsForTheNext) {
  FakeClock clock;
  FakeSqueue squeue;
  squeue.answer = [](const ProcessRequest& r) {
    std::string out;
    std::string jobs = Jobs(r) + ",";
    for (size_t at = 0, comma;
         (comma = jobs.find(',', at)) != std::string::npos; at = comma + 1)
      out += "JobId=" + jobs.substr(at, comma - at) +
             " JobState=RUNNING Reason=None NodeList=n1\n";
    return Exited(0, out);
  };
  SlurmStatePoll poll(squeue, clock, "squeue", 1000ms);
  poll.Add("1");
  EXPECT_THAT(poll.Line("1"), HasSubstr("RUNNING"));
  poll.Add("2");
  EXPECT_EQ(poll.Line("2"), "");  // Cannot tell yet: no new question.
  clock.Advance(1000ms);
  EXPECT_THAT(poll.Line("2"), HasSubstr("JobId=2 JobState=RUNNING"));
  poll.Remove("1");
  clock.Advance(1000ms);
  poll.Line("2");
  ASSERT_EQ(squeue.Requests().size(), 3u);
  EXPECT_EQ(Jobs(squeue.Requests()[1]), "1,2");
  EXPECT_EQ(Jobs(squeue.Requests()[2]), "2");
}

TEST(SlurmStatePollTest, AFailedQuestionTellsNothingForAPeriod) {
  FakeClock clock;
  FakeSqueue squeue;
  squeue.answer = [](const ProcessRequest&) {
    return Exited(1, "",
                  "slurm_load_jobs error: Unable to contact slurm "
                  "controller (connect failure)");
  };
  SlurmStatePoll poll(squeue, clock, "squeue", 1000ms);
  poll.Add("7");
  EXPECT_EQ(poll.Line("7"), "");
  EXPECT_EQ(poll.Line("7"), "");
  EXPECT_EQ(squeue.Requests().size(), 1u);
  // Every job asked of is one Slurm forgot: each is gone.
  squeue.answer = [](const ProcessRequest&) {
    return Exited(1, "", "slurm_load_jobs error: Invalid job id specified");
  };
  clock.Advance(1000ms);
  EXPECT_EQ(poll.Line("7"), "JobId=7 JobState=GONE");
  // A question cut short (its timeout) tells nothing.
  squeue.answer = [](const ProcessRequest&) {
    ProcessResult r;
    r.end = ProcessEnd::kTimedOut;
    r.err.text = "Invalid job id";
    return r;
  };
  clock.Advance(1000ms);
  EXPECT_EQ(poll.Line("7"), "");
}

TEST(SlurmStatePollTest, ManyJobsGoInQuestionsOf500) {
  FakeClock clock;
  FakeSqueue squeue;
  squeue.answer = [](const ProcessRequest&) { return Exited(0, ""); };
  SlurmStatePoll poll(squeue, clock, "squeue", 1000ms);
  for (int i = 1; i <= 1001; ++i) poll.Add(std::to_string(i));
  EXPECT_EQ(poll.Line("1"), "");
  EXPECT_EQ(squeue.Requests().size(), 3u);
  EXPECT_EQ(poll.questions(), 1);
}

// Lines for other jobs, or for jobs not asked of, are not taken.
TEST(SlurmStatePollTest, OnlyTheJobsAskedOfAreTaken) {
  FakeClock clock;
  FakeSqueue squeue;
  squeue.answer = [](const ProcessRequest&) {
    return Exited(0,
                  "JobId=9 JobState=RUNNING Reason=None NodeList=n1\n"
                  "garbage\n\nJobId= JobState=RUNNING\n"
                  "JobId=1 JobState=COMPLETED Reason=None NodeList=n1\n");
  };
  SlurmStatePoll poll(squeue, clock, "squeue", 1000ms);
  poll.Add("1");
  EXPECT_THAT(poll.Line("1"), HasSubstr("COMPLETED"));
  EXPECT_EQ(poll.Line("9"), "");
}

// Jobs asking at once from many threads: one question between them.
TEST(SlurmStatePollTest, ThreadsAskingAtOnceShareOneQuestion) {
  FakeClock clock;
  FakeSqueue squeue;
  std::atomic<int> inside{0};
  squeue.answer = [&](const ProcessRequest&) {
    ++inside;
    return Exited(0, "");
  };
  SlurmStatePoll poll(squeue, clock, "squeue", 1000ms);
  for (int i = 0; i < 16; ++i) poll.Add(std::to_string(i));
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] { poll.Line(std::to_string(i)); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(inside.load(), 1);
  EXPECT_EQ(poll.questions(), 1);
}

}  // namespace
}  // namespace steps
