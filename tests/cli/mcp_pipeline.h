// Shared by the MCP client's CLI tests (stdio and Streamable HTTP): the
// pipeline they run and the bound on each run of `steps`.
#ifndef STEPS_TESTS_CLI_MCP_PIPELINE_H_
#define STEPS_TESTS_CLI_MCP_PIPELINE_H_

#include <chrono>
#include <string>

#include "common/steps_cli.h"

namespace steps::test_support {

// A pipeline with `servers` (the mcp_servers: block), agent `a` granting
// `grant`, one agent step (with `assert`, a step's assert: block, if any),
// and `script` as a's mock script.
inline std::string McpPipeline(const std::string& servers,
                               const std::string& grant,
                               const std::string& script,
                               const std::string& assert = "") {
  return servers +
         "agents:\n"
         "- name: a\n"
         "  source: { model: mock/a }\n"
         "  tools: [" +
         grant +
         "]\n"
         "jobs:\n"
         "- name: j\n"
         "  plan:\n"
         "  - agent: a\n"
         "    messages: [hi]\n" +
         assert + "mock:\n" + script;
}

// A run of `steps` killed after 120 s, so a hang fails instead of hanging.
inline StepsOptions Bounded(const std::string& prefix = "") {
  StepsOptions o;
  o.prefix = prefix;
  o.kill_after = std::chrono::seconds(120);
  return o;
}

}  // namespace steps::test_support

#endif  // STEPS_TESTS_CLI_MCP_PIPELINE_H_
