// `steps init [DIR]`: a starter pipeline that passes `steps test` at once.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"

namespace steps::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFileName = "steps.yaml";

constexpr const char* kStarter = R"(# A starter pipeline, written by `steps init`. Every key is described in
# docs/pipeline.md; `steps explain steps.yaml` shows each resolved limit and
# where it comes from.
agents:
- name: assistant
  source: { model: openai/gpt-4.1-mini }   # a real run reads OPENAI_API_KEY
  persona: You review short notes and answer in one sentence.
  tools: [read_file, list_files]
  timeout: 5m          # the whole conversation: every request, retry and tool call
  max_turns: 10

jobs:
- name: hello
  timeout: 15m
  plan:
  - task: prepare
    timeout: 1m
    outputs: [notes]
    run: |
      echo "steps keeps every limit honest." > notes/NOTE.md
      cat notes/NOTE.md
    assert: { stdout: every limit honest }
  - agent: assistant
    messages: ["Read notes/NOTE.md and say whether it is clear."]
    assert: { stdout: clear }
  assert:
    execution: [prepare, assistant]
    outcome: succeeded

# `steps test` and `steps run --mock` answer the agent from this script, in
# process: no API key, nothing leaves the machine. See docs/mock.md.
mock:
  assistant:
  - call: { name: read_file, arguments: { path: notes/NOTE.md } }
  - expect: { tool_result: true }
    say: The note is clear and says one thing well.
)";

struct InitOptions {
  std::string dir = ".";
  bool force = false;
};

int RunInit(const InitOptions& opts) {
  std::error_code ec;
  fs::create_directories(opts.dir, ec);
  if (ec) {
    std::cerr << "steps init: cannot create " << opts.dir << ": "
              << ec.message() << "\n";
    return kExitJobFailed;
  }
  const fs::path file = fs::path(opts.dir) / kFileName;
  if (fs::exists(file, ec) && !opts.force) {
    std::cerr << "steps init: " << file.string()
              << " already exists; pass --force to replace it\n";
    return kExitJobFailed;
  }
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << kStarter;
  out.close();
  if (!out) {
    std::cerr << "steps init: cannot write " << file.string() << "\n";
    return kExitJobFailed;
  }
  const std::string f = file.lexically_normal().string();
  std::cout << "Wrote " << f
            << ": a task, an agent answered by its mock: block, and assert: "
               "blocks that pass.\n\n"
            << "Next:\n"
            << "  steps test " << f
            << "            judge it by its assert: blocks\n"
            << "  steps run " << f << " --mock      run it on the mock\n"
            << "  steps explain " << f
            << "         every resolved limit and where it comes from\n";
  return kExitOk;
}

}  // namespace

Command InitCommand() {
  return {"init", "Write a starter pipeline (DIR/steps.yaml) that passes steps test",
          [](CLI::App& app) -> std::function<int()> {
            auto opts = std::make_shared<InitOptions>();
            app.add_option("dir", opts->dir, "Folder to write steps.yaml in")
                ->capture_default_str();
            app.add_flag("--force", opts->force,
                         "Replace an existing steps.yaml");
            return [opts] { return RunInit(*opts); };
          }};
}

}  // namespace steps::cli
