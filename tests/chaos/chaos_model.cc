#include "chaos_model.h"

#include <nlohmann/json.hpp>

#include "common/chat_completion.h"

namespace steps::chaos {

using nlohmann::json;

ChaosModel::ChaosModel(std::chrono::milliseconds latency) : latency_(latency) {
  server_.Post("/v1/chat/completions",
               [this](const httplib::Request& req, httplib::Response& res) {
                 Answer(req, res);
               });
  port_ = server_.bind_to_any_port("127.0.0.1");
  if (port_ > 0)
    serving_ = std::thread([this] { server_.listen_after_bind(); });
}

ChaosModel::~ChaosModel() {
  server_.stop();
  if (serving_.joinable()) serving_.join();
}

void ChaosModel::StartTrial(const std::string& out) {
  std::lock_guard<std::mutex> lock(mu_);
  out_ = out;
  log_.clear();
  refused_.clear();
}

std::vector<Answered> ChaosModel::log() {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

std::vector<std::string> ChaosModel::refused() {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

void ChaosModel::Answer(const httplib::Request& req, httplib::Response& res) {
  const json body = json::parse(req.body, nullptr, false);
  const std::string agent = req.get_header_value("X-Steps-Agent");
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = out_;
  }
  int results = 0;
  if (body.is_object() && body.contains("messages") &&
      body["messages"].is_array()) {
    for (const json& m : body["messages"])
      results += m.value("role", "") == "tool";
  }
  json message;
  std::string tag;
  if (agent == "worker" && results < kWorkerCalls) {
    tag = "w" + std::to_string(results + 1);
    message = test_support::ShellCall(
        tag, "echo " + tag + " >> " + out + "/appended.txt; echo " + tag);
  } else if (agent == "fixer" && results == 0) {
    tag = "f1";
    message = test_support::ShellCall(
        tag, "echo f1 >> " + out + "/appended.txt; touch " + out + "/fixed");
  } else if (agent == "worker" || agent == "fixer") {
    tag = agent + " done after " + std::to_string(results) + " calls";
    message = {{"role", "assistant"}, {"content", tag}};
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    refused_.push_back("a request from agent '" + agent + "'");
    res.status = 400;
    return;
  }
  std::this_thread::sleep_for(latency_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back({incarnation_.load(), tag});
  }
  res.set_content(test_support::ChatAnswer(message).dump(), "application/json");
}

}  // namespace steps::chaos
