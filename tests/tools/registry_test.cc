#include "tools/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "tools/file_tools.h"

namespace steps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ToolRegistryTest, BuiltInToolsByName) {
  const ToolRegistry& registry = ToolRegistry::BuiltIn();
  EXPECT_THAT(registry.Names(), ElementsAre("read_file", "write_file",
                                            "list_files", "run_shell"));
  ASSERT_NE(registry.Find("run_shell"), nullptr);
  EXPECT_EQ(registry.Find("run_shell")->name(), "run_shell");
  EXPECT_EQ(registry.Find("rm_rf"), nullptr);
}

TEST(ToolRegistryTest, GrantKeepsOrderAndDropsDuplicates) {
  Result<std::vector<const Tool*>> granted =
      ToolRegistry::BuiltIn().Grant({"run_shell", "read_file", "run_shell"});
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  ASSERT_EQ(granted->size(), 2u);
  EXPECT_EQ((*granted)[0]->name(), "run_shell");
  EXPECT_EQ((*granted)[1]->name(), "read_file");
  EXPECT_TRUE(ToolRegistry::BuiltIn().Grant({})->empty());
}

TEST(ToolRegistryTest, GrantOfAnUnknownToolNamesItAndTheKnownOnes) {
  Result<std::vector<const Tool*>> granted =
      ToolRegistry::BuiltIn().Grant({"read_file", "browse_web"});
  ASSERT_FALSE(granted.ok());
  EXPECT_EQ(granted.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(granted.status().message(),
            "unknown tool 'browse_web' (known tools: read_file, write_file, "
            "list_files, run_shell)");
}

TEST(ToolRegistryTest, AddRefusesATakenName) {
  ToolRegistry registry = ToolRegistry::WithBuiltInTools();
  Status s = registry.Add(std::make_unique<ReadFileTool>());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'read_file' is already registered"));
  EXPECT_EQ(registry.Names().size(), 4u);
}

TEST(ToolRegistryTest, OpenAiFunctionShape) {
  Result<std::vector<const Tool*>> granted =
      ToolRegistry::BuiltIn().Grant({"write_file"});
  nlohmann::json tools = OpenAiTools(*granted);
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0]["type"], "function");
  const nlohmann::json& fn = tools[0]["function"];
  EXPECT_EQ(fn["name"], "write_file");
  EXPECT_THAT(fn["description"].get<std::string>(), HasSubstr("file"));
  EXPECT_EQ(fn["parameters"]["type"], "object");
  EXPECT_EQ(fn["parameters"]["properties"]["path"]["type"], "string");
  EXPECT_EQ(fn["parameters"]["properties"]["content"]["type"], "string");
  EXPECT_EQ(fn["parameters"]["required"],
            nlohmann::json::array({"path", "content"}));
  EXPECT_EQ(fn["parameters"]["additionalProperties"], false);
}

}  // namespace
}  // namespace steps
