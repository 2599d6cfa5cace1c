// Deciding gates through the web UI's API while `steps run` waits on them in
// another process: an approval reaches the store and the run; forged
// requests (no token, a wrong one, a foreign Origin, a foreign Host) are
// refused and the gate keeps waiting; bad bodies are refused saying what to
// send, the reason's limit holds at its edge; a gate with approvers refuses
// the page and names the command to use; a decided gate answers 409.
//
// Timing: every wait is for a condition (the gate showing in the API, the
// run's exit), bounded far above what it needs.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "common/steps_cli.h"
#include "common/temp_dir.h"
#include "ui/decisions.h"
#include "ui/server.h"
#include "ui/write_guard.h"

namespace steps::ui {
namespace {

using nlohmann::json;
using test_support::Has;
using test_support::TempDir;

// Sends `request` as it is on a new connection to `port` and returns what
// the server answers until it closes the connection (at most 10 s), with
// nothing more sent: a server waiting for a body would answer nothing.
std::string RawExchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return answer;
}

constexpr const char* kOneGate = R"(jobs:
- name: j
  plan:
  - gate: deploy
    message: Ship it now?
    timeout: 2m
  - task: ship
    run: echo shipping
)";

// A UI server on the state folder of a `steps run` that waits on a gate.
class GateUiTest : public ::testing::Test {
 protected:
  void StartRun(const std::string& pipeline) {
    dir_.Write("p.yaml", pipeline);
    pid_ = test_support::SpawnSteps(
        dir_.path(), {"run", "p.yaml", "--plain", "--state-dir", "state"},
        dir_ / "run.log");
    ASSERT_GT(pid_, 0);
    ASSERT_TRUE(server_.Start("127.0.0.1", 0).ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_.port());
    client_->set_read_timeout(10, 0);
    // Until the gate shows waiting (bounded).
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < give_up) {
      json run = Run();
      if (run.is_object()) {
        run_id_ = run["id"];
        const json gate = run["jobs"][0]["steps"][0]["gate"];
        if (gate.is_object() && gate["state"] == "waiting") break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(FirstGate()["state"], "waiting") << Log();
    // The token reaches a person through the link `steps ui` prints; the
    // server itself never hands it out.
    token_ = server_.token();
    ASSERT_EQ(token_.size(), 64u);
  }

  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    server_.Stop();
  }

  // The run object of GET /api/runs/latest, or null.
  json Run() {
    auto r = client_->Get("/api/runs/latest");
    if (!r || r->status != 200) return json();
    return json::parse(r->body, nullptr, false)["run"];
  }
  json FirstGate() {
    json run = Run();
    return run.is_object() ? run["jobs"][0]["steps"][0]["gate"] : json();
  }
  std::string Log() {
    return test_support::RunInShell(dir_.path(), "cat run.log").out;
  }

  // POST `path` with `headers` (the token unless `with_token` is false).
  httplib::Result Post(const std::string& path, const std::string& body,
                       const std::string& type = "application/json",
                       httplib::Headers headers = {}, bool with_token = true) {
    if (with_token) headers.emplace(kTokenHeader, token_);
    return client_->Post(path.c_str(), headers, body, type.c_str());
  }
  std::string GatePath(const std::string& step, const std::string& verb) {
    return "/api/runs/" + run_id_ + "/gates/" + step + "/" + verb;
  }

  // The run's exit code once it ends (bounded at 60 s); -1 if it did not.
  int WaitRun() {
    return test_support::WaitForExit(pid_, std::chrono::seconds(60));
  }

  TempDir dir_;
  UiServer server_{dir_ / "state"};
  std::unique_ptr<httplib::Client> client_;
  pid_t pid_ = -1;
  std::string run_id_;
  std::string token_;
};

// The JSON body of `r`, or null.
json Body(const httplib::Result& r) {
  return r ? json::parse(r->body, nullptr, false) : json();
}
// The "error" of an answer's body; "" without one.
std::string ErrorOf(const httplib::Result& r) {
  const json body = Body(r);
  return body.is_object() ? body.value("error", "") : "";
}

TEST_F(GateUiTest, AnApprovalFromThePageReachesTheStoreAndTheRun) {
  ASSERT_NO_FATAL_FAILURE(StartRun(kOneGate));
  const json waiting = FirstGate();
  EXPECT_EQ(waiting["message"], "Ship it now?");
  EXPECT_TRUE(waiting["deadline"].is_string()) << waiting;
  EXPECT_TRUE(waiting["approvers"].empty());

  // The step id URL-encoded, as the page sends it.
  auto r = Post(GatePath("j%3A1", "approve"), R"({"reason": "looks good"})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json gate = Body(r)["gate"];
  EXPECT_EQ(gate["state"], "approved");
  EXPECT_EQ(gate["step"], "j:1");
  EXPECT_EQ(gate["reason"], "looks good");
  const std::string by = gate["taken_by"];
  EXPECT_TRUE(Has(by, "@") && Has(by, " (via ui)")) << by;

  EXPECT_EQ(WaitRun(), 0) << Log();
  EXPECT_TRUE(Has(Log(), "ship | shipping")) << Log();
  const json stored = FirstGate();
  EXPECT_EQ(stored["state"], "approved");
  EXPECT_EQ(stored["reason"], "looks good");
  EXPECT_EQ(stored["taken_by"], by);

  // Decided: another decision, by name through "latest", is a 409 saying
  // how it ended.
  auto again = Post("/api/runs/latest/gates/deploy/reject", "");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 409) << again->body;
  EXPECT_EQ(Body(again)["refusal"], "not_waiting");
  EXPECT_TRUE(Has(ErrorOf(again),
                  "was already approved by " + by.substr(0, by.find(' '))))
      << again->body;
  // Unknown runs and gates: 404.
  auto no_gate = Post(GatePath("nope", "approve"), "");
  ASSERT_TRUE(no_gate);
  EXPECT_EQ(no_gate->status, 404);
  EXPECT_TRUE(Has(ErrorOf(no_gate), "has no gate 'nope'")) << no_gate->body;
  auto no_run = Post("/api/runs/19990101/gates/deploy/approve", "");
  ASSERT_TRUE(no_run);
  EXPECT_EQ(no_run->status, 404);
}

TEST_F(GateUiTest, ForgedDecisionsAreRefusedAndTheGateKeepsWaiting) {
  ASSERT_NO_FATAL_FAILURE(StartRun(kOneGate));
  const std::string path = GatePath("j:1", "approve");
  const std::string body = R"({"reason": "forged"})";
  auto expect_refused = [&](const httplib::Result& r, int status,
                            const char* refusal, const char* what) {
    ASSERT_TRUE(r) << what;
    EXPECT_EQ(r->status, status) << what << ": " << r->body;
    if (refusal) {
      EXPECT_EQ(Body(r)["refusal"], refusal) << what;
    }
    EXPECT_EQ(FirstGate()["state"], "waiting") << what;
  };
  expect_refused(Post(path, body, "application/json", {}, false), 403, "token",
                 "no token");
  EXPECT_TRUE(Has(ErrorOf(Post(path, body, "application/json", {}, false)),
                  "X-Steps-Token"));
  // Refused from the headers alone, before any body is read: a chunked
  // body (which the library would read whole, past the 64 KiB limit), a
  // POST that does not say its length, and a POST without the token.
  const std::string port = std::to_string(server_.port());
  const std::string head = "POST " + path +
                           " HTTP/1.1\r\nHost: 127.0.0.1:" + port +
                           "\r\nContent-Type: application/json\r\n";
  const std::string with_token =
      std::string(kTokenHeader) + ": " + token_ + "\r\n";
  std::string answer = RawExchange(
      server_.port(), head + with_token + "Transfer-Encoding: chunked\r\n\r\n");
  EXPECT_TRUE(Has(answer, "HTTP/1.1 411")) << answer;
  EXPECT_TRUE(Has(answer, "not with a Transfer-Encoding")) << answer;
  answer = RawExchange(server_.port(), head + with_token + "\r\n");
  EXPECT_TRUE(Has(answer, "HTTP/1.1 411")) << answer;
  EXPECT_TRUE(Has(answer, "a POST says its Content-Length")) << answer;
  answer = RawExchange(server_.port(), head + "\r\n");
  EXPECT_TRUE(Has(answer, "HTTP/1.1 403")) << answer;
  EXPECT_FALSE(Has(answer, token_)) << answer;
  answer =
      RawExchange(server_.port(), head + "Content-Length: 1000000\r\n\r\n{");
  EXPECT_TRUE(Has(answer, "HTTP/1.1 403")) << answer;
  // Even the answers to requests no handler admits forbid framing.
  for (const std::string& refused :
       {std::string("GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n"),
        std::string("GET / HTTP/1.1\r\n\r\n"),
        std::string("GET / HTTP/1.1 extra\r\nHost: 127.0.0.1:" + port +
                    "\r\n\r\n")}) {
    answer = RawExchange(server_.port(), refused);
    EXPECT_TRUE(Has(answer, "X-Frame-Options: DENY")) << answer;
    EXPECT_TRUE(Has(answer, "frame-ancestors 'none'")) << answer;
  }
  EXPECT_EQ(FirstGate()["state"], "waiting");

  std::string wrong = token_;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  expect_refused(
      Post(path, body, "application/json", {{kTokenHeader, wrong}}, false), 403,
      "token", "a token one digit off");
  expect_refused(Post(path, body, "application/json",
                      {{kTokenHeader, token_ + "0"}}, false),
                 403, "token", "the token and more");
  expect_refused(
      Post(path, body, "application/json", {{kTokenHeader, ""}}, false), 403,
      "token", "an empty token");
  // A cross-site form, as another page can make a browser send.
  expect_refused(Post(path, "reason=forged",
                      "application/x-www-form-urlencoded", {}, false),
                 403, "token", "a form without the token");
  // Even with the token: a foreign page, an opaque one, a foreign Host.
  expect_refused(
      Post(path, body, "application/json", {{"Origin", "http://evil.example"}}),
      403, "origin", "a foreign Origin");
  expect_refused(Post(path, body, "application/json",
                      {{"Origin", "http://127.0.0.1:" +
                                      std::to_string(server_.port() + 1)}}),
                 403, "origin", "another port's Origin");
  expect_refused(Post(path, body, "application/json", {{"Origin", "null"}}),
                 403, "origin", "Origin null");
  // No request gets the token, with an Origin or without (a process on
  // this machine, a task of the run itself, or a client on the network when
  // the server listens beyond loopback).
  for (const httplib::Headers& h :
       {httplib::Headers{},
        httplib::Headers{{"Origin", "http://evil.example"}}}) {
    for (const char* path :
         {"/", "/api/token", "/api/runs", "/api/runs/latest"}) {
      auto got = client_->Get(path, h);
      ASSERT_TRUE(got) << path;
      EXPECT_FALSE(Has(got->body, token_)) << path;
      // And no page of another site may frame this one (clickjacking).
      EXPECT_EQ(got->get_header_value("X-Frame-Options"), "DENY") << path;
      EXPECT_EQ(got->get_header_value("Content-Security-Policy"),
                "frame-ancestors 'none'")
          << path;
    }
  }
  expect_refused(
      Post(path, body, "application/json",
           {{"Host", "evil.example:" + std::to_string(server_.port())}}),
      421, nullptr, "a foreign Host");

  // This server's own page, with the token: decided.
  auto ok =
      Post(GatePath("deploy", "reject"), R"({"reason": "not now"})",
           "application/json",
           {{"Origin", "http://127.0.0.1:" + std::to_string(server_.port())}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(WaitRun(), 1) << Log();
  EXPECT_TRUE(Has(Log(), "GATE_REJECTED")) << Log();
  EXPECT_EQ(FirstGate()["reason"], "not now");
}

TEST_F(GateUiTest, BadBodiesAreRefusedSayingWhatToSend) {
  ASSERT_NO_FATAL_FAILURE(StartRun(kOneGate));
  const std::string path = GatePath("j:1", "approve");
  auto expect_400 = [&](const httplib::Result& r, const std::string& says) {
    ASSERT_TRUE(r) << says;
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_EQ(Body(r)["refusal"], "bad_request") << r->body;
    EXPECT_TRUE(Has(ErrorOf(r), says)) << r->body;
  };
  expect_400(Post(path, "{not json"), "not valid JSON");
  expect_400(Post(path, "[1]"), "not an object");
  expect_400(Post(path, R"({"reason": 5})"), "\"reason\" must be a string");
  expect_400(Post(path, R"({"why": "x"})"), "a decision takes no 'why'");
  expect_400(Post(path, std::string(100, '[') + std::string(100, ']')),
             "not valid JSON");
  expect_400(Post(path, "hello", "text/plain"),
             "body of type 'text/plain' is not understood");
  expect_400(Post(path, "reason=%FF", "application/x-www-form-urlencoded"),
             "not valid UTF-8");
  expect_400(
      Post(path,
           json{{"reason", std::string(kMaxReasonBytes + 1, 'r')}}.dump()),
      "is 2001 bytes long; a decision keeps at most 2000");
  // The reason is in the body, once.
  expect_400(Post(path + "?reason=lost", ""), "not in the address");
  expect_400(Post(path, R"({"reason": "a", "reason": "b"})"),
             "a decision takes one reason");
  // A form carries the reason alone, once; a multipart body (which the
  // server would read into parts, not a reason) is refused.
  expect_400(Post(path, "reason=a&also=b", "application/x-www-form-urlencoded"),
             "a decision takes no 'also'");
  expect_400(
      Post(path, "reason=a&reason=b", "application/x-www-form-urlencoded"),
      "a decision takes one reason");
  expect_400(Post(path,
                  "--XX\r\nContent-Disposition: form-data; "
                  "name=\"reason\"\r\n\r\nhidden\r\n--XX--\r\n",
                  "multipart/form-data; boundary=XX"),
             "body of type 'multipart/form-data' is not understood");
  // A reason is text: no escape sequence reaches a terminal through it.
  expect_400(Post(path, json{{"reason", "ok\x1b]0;owned\x07"}}.dump()),
             "the reason holds a control character at byte 2");
  auto huge = Post(path, std::string(65 * 1024, ' '));
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 413);
  EXPECT_TRUE(Has(huge->body, "a request body holds at most 64 KiB"))
      << huge->body;
  auto nowhere = client_->Get("/no/such/page");
  ASSERT_TRUE(nowhere);
  EXPECT_EQ(nowhere->status, 404);
  EXPECT_TRUE(Has(nowhere->body, "no such page or API path")) << nowhere->body;
  EXPECT_EQ(FirstGate()["state"], "waiting");

  // A reason of exactly the limit, as a form field, is kept whole.
  const std::string longest(kMaxReasonBytes, 'r');
  auto ok =
      Post(path, "reason=" + longest, "application/x-www-form-urlencoded");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(WaitRun(), 0) << Log();
  EXPECT_EQ(FirstGate()["reason"], longest);
}

TEST_F(GateUiTest, AGateWithApproversRefusesThePageAndNamesTheCommand) {
  ASSERT_NO_FATAL_FAILURE(StartRun(R"(jobs:
- name: j
  plan:
  - gate: deploy
    approvers: [alice, ops]
    timeout: 2m
)"));
  EXPECT_EQ(FirstGate()["approvers"], json::array({"alice", "ops"}));
  auto r = Post(GatePath("j:1", "approve"), "");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  EXPECT_EQ(Body(r)["refusal"], "approvers");
  const std::string error = ErrorOf(r);
  EXPECT_TRUE(Has(error, "names its approvers (alice, ops)")) << error;
  EXPECT_TRUE(Has(error, "the web UI cannot tell who you are")) << error;
  EXPECT_TRUE(Has(error, "`steps approve " + run_id_ + " j:1`")) << error;
  EXPECT_EQ(FirstGate()["state"], "waiting");
}

TEST(WriteGuardTest, OriginsOfThisServerOnly) {
  HostAllowList hosts("127.0.0.1", 8080, {"steps.example", "ci.example:443"});
  EXPECT_TRUE(OriginAllowed("http://127.0.0.1:8080", hosts));
  EXPECT_TRUE(OriginAllowed("http://localhost:8080", hosts));
  EXPECT_TRUE(OriginAllowed("http://[::1]:8080", hosts));
  EXPECT_TRUE(OriginAllowed("http://steps.example", hosts));
  EXPECT_TRUE(OriginAllowed("https://ci.example", hosts));
  EXPECT_FALSE(OriginAllowed("http://ci.example", hosts));  // Port 80.
  EXPECT_FALSE(OriginAllowed("http://127.0.0.1:8081", hosts));
  EXPECT_FALSE(OriginAllowed("http://127.0.0.1", hosts));
  EXPECT_FALSE(OriginAllowed("http://evil.example:8080", hosts));
  EXPECT_FALSE(OriginAllowed("http://127.0.0.1:8080/", hosts));
  EXPECT_FALSE(OriginAllowed("http://x@127.0.0.1:8080", hosts));
  EXPECT_FALSE(OriginAllowed("file://127.0.0.1:8080", hosts));
  EXPECT_FALSE(OriginAllowed("null", hosts));
  EXPECT_FALSE(OriginAllowed("", hosts));
  EXPECT_FALSE(OriginAllowed("http://", hosts));
}

TEST(WriteGuardTest, TokensAreFreshAndMatchOnlyThemselves) {
  Result<WriteToken> a = WriteToken::Generate();
  Result<WriteToken> b = WriteToken::Generate();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->text().size(), 64u);
  EXPECT_EQ(a->text().find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a->text(), b->text());
  EXPECT_TRUE(a->Matches(a->text()));
  EXPECT_FALSE(a->Matches(b->text()));
  EXPECT_FALSE(a->Matches(a->text().substr(0, 63)));
  EXPECT_FALSE(a->Matches(a->text() + "0"));
  EXPECT_FALSE(a->Matches(""));
  std::string upper = a->text();
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  if (upper != a->text()) {
    EXPECT_FALSE(a->Matches(upper));
  }
}

}  // namespace
}  // namespace steps::ui
