// The chaos harness's model: an OpenAI-compatible server on loopback whose
// answer depends only on the request (which agent asks, and how many tool
// results it carries), so a request sent again after a kill gets the same
// answer, and an interrupted run can converge on the uninterrupted one.
//
// The worker agent calls run_shell kWorkerCalls times, each call appending
// its id (w1, w2, ...) to OUT/appended.txt, then answers; the fixer calls
// it once (f1: appends, and creates OUT/fixed), then answers. Every answer
// has a tag, the same on the wire and in the store: the id of the tool call
// it makes, or its text. The server keeps the tag of every answer it sent,
// with the incarnation (the `steps` process) it was sent to.
#ifndef STEPS_TESTS_CHAOS_CHAOS_MODEL_H_
#define STEPS_TESTS_CHAOS_CHAOS_MODEL_H_

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace steps::chaos {

inline constexpr int kWorkerCalls = 8;

struct Answered {
  int incarnation = 0;
  std::string tag;
};

class ChaosModel {
 public:
  // Answers after `latency` (a model takes time: kills at random moments
  // land while requests are in flight). The tool calls write under `out`,
  // which the caller sets per trial with SetOut before any request.
  explicit ChaosModel(std::chrono::milliseconds latency);
  ~ChaosModel();
  ChaosModel(const ChaosModel&) = delete;
  ChaosModel& operator=(const ChaosModel&) = delete;

  int port() const { return port_; }  // 0 when it could not listen.

  // A new trial: tool calls write under `out`; the log starts empty.
  void StartTrial(const std::string& out);
  // The incarnation that the answers from now on are sent to.
  void SetIncarnation(int n) { incarnation_ = n; }
  // Every answer sent this trial, in order.
  std::vector<Answered> log();
  // Requests this trial that could not be answered (bad body, unknown
  // agent): each is a fault of the engine.
  std::vector<std::string> refused();

 private:
  void Answer(const httplib::Request& req, httplib::Response& res);

  std::chrono::milliseconds latency_;
  httplib::Server server_;
  int port_ = 0;
  std::thread serving_;
  std::atomic<int> incarnation_{0};
  std::mutex mu_;
  std::string out_;                   // Guarded by mu_.
  std::vector<Answered> log_;         // Guarded by mu_.
  std::vector<std::string> refused_;  // Guarded by mu_.
};

}  // namespace steps::chaos

#endif  // STEPS_TESTS_CHAOS_CHAOS_MODEL_H_
