// The tool boundary's guard: a tool that throws anything is an error
// result the model sees, and the conversation carries on.
#include <gtest/gtest.h>

#include <stdexcept>

#include "agent/conversation.h"
#include "agent_test_util.h"
#include "tools/registry.h"

namespace steps::agent {
namespace {

using testing::Invocation;
using testing::MockSource;
using testing::RequestMessages;

class ThrowingTool : public Tool {
 public:
  ThrowingTool(std::string name, bool standard)
      : Tool(std::move(name), "throws", nlohmann::json::object()),
        standard_(standard) {}

 protected:
  ToolResult Run(const nlohmann::json&, const ToolContext&) const override {
    if (standard_) throw std::runtime_error("disk on fire");
    throw 42;  // Not a std::exception: only the boundary's guard sees it.
  }

 private:
  bool standard_;
};

TEST(ToolGuardTest, AToolThatThrowsIsAnErrorResultNotACrash) {
  ToolRegistry tools;
  ASSERT_TRUE(tools.Add(std::make_unique<ThrowingTool>("boom", true)).ok());
  ASSERT_TRUE(tools.Add(std::make_unique<ThrowingTool>("odd", false)).ok());
  auto script = ParseMockScriptText(R"(
w:
  - call: {name: boom, arguments: {}}
  - call: {name: odd, arguments: {}}
  - say: carried on
)");
  ASSERT_TRUE(script.ok()) << script.status().message();
  AgentRunnerOptions options;
  options.retry = testing::FixedBackoff();
  options.tools = &tools;
  auto runner = MakeMockAgentRunner(*script, std::move(options));
  FakeClock clock(/*auto_advance=*/true);
  AgentContext ctx;
  ctx.clock = &clock;
  testing::TempDir dir;
  AgentInvocation inv = Invocation({MockSource("w")});
  inv.working_dir = dir.path();
  inv.tools = {"boom", "odd"};
  AgentResult r = runner->Run(inv, ctx);
  ASSERT_EQ(r.outcome, Outcome::kSucceeded) << r.error;
  EXPECT_EQ(r.answer, "carried on");
  auto last = RequestMessages(runner->MockRequests().at(2));
  ASSERT_EQ(last.size(), 5u);
  EXPECT_EQ(last[2]["content"], "boom: internal error: disk on fire");
  EXPECT_EQ(last[4]["content"], "odd: internal error");
}

}  // namespace
}  // namespace steps::agent
