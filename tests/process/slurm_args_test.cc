// The parts of SlurmLauncher that need no cluster: the sbatch options a
// placement gives, the time limit, reading scontrol's lines.
#include <gtest/gtest.h>

#include "process/slurm_launcher.h"

namespace steps {
namespace {

using namespace std::chrono_literals;

TEST(SlurmArgsTest, TheTimeLimitIsWholeMinutesRoundedUp) {
  EXPECT_EQ(SlurmTimeLimit(Millis(-5)), "1");
  EXPECT_EQ(SlurmTimeLimit(0ms), "1");
  EXPECT_EQ(SlurmTimeLimit(1ms), "1");
  EXPECT_EQ(SlurmTimeLimit(60000ms), "1");
  EXPECT_EQ(SlurmTimeLimit(60001ms), "2");
  EXPECT_EQ(SlurmTimeLimit(std::chrono::hours(24 * 365)), "525600");
}

TEST(SlurmArgsTest, APlacementGivesOnlyWhatItSets) {
  EXPECT_TRUE(SbatchPlacementArgs({}).empty());
  ClusterPlacement p;
  p.partition = "gpu";
  p.account = "lab";
  p.qos = "high";
  p.cpus = 4;
  p.mem = "16G";
  p.gres = "gpu:1";
  p.extra = {"--constraint=avx2", "--exclusive"};
  EXPECT_EQ(
      SbatchPlacementArgs(p),
      (std::vector<std::string>{
          "--partition=gpu", "--account=lab", "--qos=high", "--cpus-per-task=4",
          "--mem=16G", "--gres=gpu:1", "--constraint=avx2", "--exclusive"}));
}

TEST(SlurmArgsTest, ScontrolFieldsAreReadWhole) {
  const std::string line =
      "JobId=12 JobName=steps:j:1 UserId=root(0) JobState=NODE_FAIL "
      "Reason=NodeDown ExitCode=0:15 NodeList=vm";
  EXPECT_EQ(ScontrolField(line, "JobState"), "NODE_FAIL");
  EXPECT_EQ(ScontrolField(line, "Reason"), "NodeDown");
  EXPECT_EQ(ScontrolField(line, "NodeList"), "vm");
  EXPECT_EQ(ScontrolField(line, "JobId"), "12");
  // Not the end of another key's name, and nothing for an absent key.
  EXPECT_EQ(ScontrolField(line, "State"), "");
  EXPECT_EQ(ScontrolField(line, "Id"), "");
  EXPECT_EQ(ScontrolField("", "JobState"), "");
}

}  // namespace
}  // namespace steps
