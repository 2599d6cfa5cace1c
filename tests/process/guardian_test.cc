#include "process/guardian.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace steps {
namespace {

// A file system of the given executable files.
auto Executables(std::set<std::string> files) {
  return [files = std::move(files)](const std::string& path) {
    return files.count(path) > 0;
  };
}

TEST(GuardianProgramTest, BesideStepsComesFirst) {
  EXPECT_EQ(
      GuardianProgram("/b/src/cli/steps",
                      Executables({"/b/src/cli/steps-guardian",
                                   "/b/src/libexec/steps/steps-guardian"})),
      "/b/src/cli/steps-guardian");
}

TEST(GuardianProgramTest, AnInstalledStepsFindsItInLibexec) {
  EXPECT_EQ(GuardianProgram(
                "/usr/bin/steps",
                Executables({"/usr/bin/../libexec/steps/steps-guardian"})),
            "/usr/bin/../libexec/steps/steps-guardian");
}

TEST(GuardianProgramTest, WithoutItStepsGuardsWithItself) {
  EXPECT_EQ(GuardianProgram("/opt/steps", Executables({"/opt/other"})),
            "/proc/self/exe");
  // A path /proc could not give, or not an absolute one, is never searched
  // from the working folder.
  EXPECT_EQ(GuardianProgram("", Executables({"steps-guardian"})),
            "/proc/self/exe");
  EXPECT_EQ(GuardianProgram("steps", Executables({"steps-guardian"})),
            "/proc/self/exe");
  EXPECT_EQ(GuardianProgram("bin/steps", Executables({"bin/steps-guardian"})),
            "/proc/self/exe");
}

}  // namespace
}  // namespace steps
