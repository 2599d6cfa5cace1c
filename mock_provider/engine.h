// The mock provider's brain, shared by the HTTP server and the in-process
// transport: picks the scripted entry for each request, checks its
// expectations, renders the answer in the caller's wire format (OpenAI chat
// completions or Anthropic Messages, plain or streamed) and keeps every
// request received.
#ifndef STEPS_MOCK_PROVIDER_ENGINE_H_
#define STEPS_MOCK_PROVIDER_ENGINE_H_

#include <map>
#include <mutex>
#include <unordered_map>
#include <string>
#include <vector>

#include "mock_provider/script.h"
#include "providers/http.h"

namespace steps {

// One request as the mock received it.
struct MockRequestRecord {
  int index = 0;       // 1-based, over all requests.
  std::string path;    // e.g. "/v1/chat/completions".
  std::string format;  // "openai" or "anthropic".
  std::string agent;   // X-Steps-Agent ("" when absent).
  std::string step;    // X-Steps-Step.
  std::string model;
  bool stream = false;
  std::string body;    // As received.
  std::string script;  // The key whose script answered; "" = default.
  int entry_line = 0;  // Line of the entry that answered (0: built-in).
  std::string action;  // "say", "status", "hang", "drop", ...
  int connection = 0;  // Client port (HTTP server only): equal ports,
                       // same connection.
  // 1-based, among the requests its script (or the default) received.
  int script_request = 0;
  std::vector<std::string> expect_failures;
};

// "request 5, agent 'reviewer', step 'review', its request 2": which
// request a failed expectation is about (the step when the request named
// one; the script's own count when it differs from the overall one).
std::string DescribeRequest(const MockRequestRecord& record);

// What to do for one request.
struct MockReply {
  enum class Kind { kRespond, kHang, kDrop };
  Kind kind = Kind::kRespond;
  Millis delay{0};
  int status = 200;
  HttpHeaders headers;
  // Plain answers: the whole body. Streamed answers: empty; see events.
  std::string body;
  bool stream = false;
  // Streamed answers: the SSE text, one element per event, sent in order.
  std::vector<std::string> events;
  // Streamed answers: after `events`, go silent instead of ending.
  bool hang_after_events = false;
};

struct MockEngineOptions {
  // Each conversation, known by its first user message, goes through its
  // script from the first entry, so one script answers many conversations
  // held at once (an across's cells, a fan-out benchmark). Off: a script's
  // entries answer its requests in order, whichever conversation sent them.
  bool by_conversation = false;
};

// Thread-safe.
class MockEngine {
 public:
  explicit MockEngine(MockScript script, MockEngineOptions options = {});

  // Records the request and decides the reply. `headers` as received;
  // `connection` identifies the client connection (0 if none).
  MockReply Handle(const std::string& path, const HttpHeaders& headers,
                   const std::string& body, int connection = 0);

  // The script it serves (never changed after construction).
  const MockScript& script() const { return script_; }

  std::vector<MockRequestRecord> Requests() const;
  // How many requests it received.
  size_t RequestCount() const;
  // The records as a JSON array (what GET /_requests serves).
  std::string RequestsJson() const;
  // Every failed expectation so far, "line N: ...". Empty = all held.
  std::vector<std::string> ExpectationFailures() const;

 private:
  const MockEntry* Pick(MockRequestRecord& record);

  MockScript script_;
  const MockEngineOptions options_;
  mutable std::mutex mu_;
  // Script key (and conversation, by_conversation) -> next entry, and
  // requests received.
  std::unordered_map<std::string, size_t> next_;
  std::unordered_map<std::string, int> received_;
  std::vector<MockRequestRecord> requests_;
};

}  // namespace steps

#endif  // STEPS_MOCK_PROVIDER_ENGINE_H_
