#include "process/spawn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace steps {
namespace {

bool Contains(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

TEST(BuildChildEnvironmentTest, InheritsThenOverridesThenUnsets) {
  ProcessRequest request;
  request.env["B"] = "override";
  request.env["C"] = "new";
  request.env_unset = {"A"};
  std::vector<std::string> env =
      BuildChildEnvironment(request, {"A=1", "B=2", "D=4"});
  EXPECT_FALSE(Contains(env, "A=1"));
  EXPECT_TRUE(Contains(env, "B=override"));
  EXPECT_TRUE(Contains(env, "C=new"));
  EXPECT_TRUE(Contains(env, "D=4"));
  EXPECT_EQ(env.size(), 3u);
}

TEST(BuildChildEnvironmentTest, ExactIgnoresTheBase) {
  ProcessRequest request;
  request.inherit_env = false;
  request.env["ONLY"] = "this";
  EXPECT_EQ(BuildChildEnvironment(request, {"A=1"}),
            std::vector<std::string>{"ONLY=this"});
}

TEST(BuildChildEnvironmentTest, InheritOnlyKeepsTheNamedBaseVariables) {
  // A CLI source: PATH and HOME from the base, its key from `env`, and
  // nothing else of the base (no other key, however named).
  ProcessRequest request;
  request.inherit_only = std::vector<std::string>{"PATH", "HOME", "LANG"};
  request.env["ANTHROPIC_API_KEY"] = "k";
  EXPECT_EQ(BuildChildEnvironment(request,
                                  {"PATH=/bin", "HOME=/h", "OPENAI_API_KEY=x",
                                   "PATHX=no", "TOKEN=y"}),
            (std::vector<std::string>{"ANTHROPIC_API_KEY=k", "HOME=/h",
                                      "PATH=/bin"}));
}

TEST(FindExecutableTest, SearchesPathAndKeepsSlashedNames) {
  Result<std::string> sh = FindExecutable("sh", "/nonexistent:/bin:/usr/bin");
  ASSERT_TRUE(sh.ok()) << sh.status().ToString();
  EXPECT_NE(sh->find("/sh"), std::string::npos);
  EXPECT_EQ(*FindExecutable("./x", ""), "./x");
  EXPECT_EQ(FindExecutable("no-such-program-xyz", "/bin").status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace steps
