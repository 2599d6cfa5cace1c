// Durability through the real binary: each durable point of a conversation
// is committed to the run store before what follows it happens. A loopback
// model server reads the store (as another process would after a crash)
// each time a request arrives, and finds the request's messages and every
// earlier tool result already there.
#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/chat_completion.h"
#include "common/steps_cli.h"
#include "common/store_sql.h"
#include "common/temp_dir.h"

namespace steps {
namespace {

using nlohmann::json;
using test_support::ChatAnswer;
using test_support::RunSteps;
using test_support::ShellCall;
using test_support::TempDir;

// Rows of conversation_log of `kind`, read through a connection of its own.
int CountRows(const std::string& db_path, const std::string& kind) {
  const std::string n = test_support::StoreSql(
      db_path,
      "SELECT count(*) FROM conversation_log WHERE kind = '" + kind + "'");
  return n.empty() ? -1 : std::stoi(n);
}

TEST(DurableCliTest, EachRequestIsStoredBeforeItIsSent) {
  TempDir dir;
  const std::string db_path = dir.path() + "/state/steps.db";
  struct Seen {
    int messages = 0;
    int requests_stored = 0;
    int tools_finished = 0;
  };
  std::mutex mu;
  std::vector<Seen> seen;
  httplib::Server server;
  server.Post("/v1/chat/completions", [&](const httplib::Request& req,
                                          httplib::Response& res) {
    json body = json::parse(req.body);
    Seen s;
    s.messages = static_cast<int>(body["messages"].size());
    s.requests_stored = CountRows(db_path, "request");
    s.tools_finished = CountRows(db_path, "tool_finished");
    size_t n;
    {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(s);
      n = seen.size();
    }
    json message = n <= 2 ? ShellCall("call_" + std::to_string(n),
                                      "echo turn " + std::to_string(n))
                          : json{{"role", "assistant"}, {"content", "done"}};
    res.set_content(ChatAnswer(message).dump(), "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { server.listen_after_bind(); });
  dir.Write("p.yaml",
            "agents:\n"
            "- name: a\n"
            "  source: {model: openai/m, base_url: http://127.0.0.1:" +
                std::to_string(port) +
                "/v1}\n"
                "  tools: [run_shell]\n"
                "jobs:\n"
                "- name: j\n"
                "  plan:\n"
                "  - agent: a\n"
                "    messages: [go]\n");
  auto run = RunSteps(dir.path(), "run p.yaml --plain --state-dir state",
                      {.prefix = "OPENAI_API_KEY=k"});
  server.stop();
  serving.join();
  EXPECT_EQ(run.exit_code, 0) << run.out;
  ASSERT_EQ(seen.size(), 3u) << run.out;
  for (size_t i = 0; i < seen.size(); ++i) {
    SCOPED_TRACE(i);
    // This request is stored, and every tool result it carries.
    EXPECT_EQ(seen[i].requests_stored, static_cast<int>(i) + 1);
    EXPECT_EQ(seen[i].tools_finished, static_cast<int>(i));
  }
  // system (the deadline), user, then an assistant and a tool per turn.
  EXPECT_EQ(seen[2].messages, 6);
  EXPECT_EQ(CountRows(db_path, "answer"), 3);
  EXPECT_EQ(CountRows(db_path, "tool_started"), 2);
}

}  // namespace
}  // namespace steps
